import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { ErrorCode, NodeAdminState } from '@llmgw/shared';
import { MAX_MODEL_NAME } from '../catalog/loaded.js';
import type { Controller } from '../controller/controller.js';
import { forbidden, type AccessTokens } from '../api/access.js';
import type { Principal } from '../http/principal.js';
import { echo, httpStatus, toDomainError } from '../errors.js';
import { methodNotAllowed } from '../http/http.js';
import { bodyParser } from '../http/body-routes.js';
import type { KeyRing } from '../gateway/keys.js';
import { catalogStatusView, explainView, fleetTotals, modelViews, nodeViewOf, replicaViews } from '../api/views.js';
import { adapterProblems } from '../api/adapter-views.js';
import { nodePage } from '../api/node-pages.js';
import { rolloutView } from '../api/rollouts-api.js';
import { drainPage, fleetPage } from './fleet-page.js';
import { keysPage } from './keys-page.js';
import { layout, messagePage, type Page } from './layout.js';
import { loginPage } from './login-page.js';
import { modelPage, modelsPage } from './models-page.js';
import type { DashboardOptions } from './options.js';
import { LoginLimiter, SESSION_COOKIE, SESSION_TTL_S, Sessions, cookieValue, type Session } from './session.js';
import { CSP } from './style.js';
import { isHttps, safeNext, sameOrigin } from './origin.js';

export { sameOrigin } from './origin.js';

/**
 * The dashboard, mounted at `/` on the admin listener. Pages are rendered in-process
 * from the same view functions as `/api/v1`, so the two never disagree, and there is no
 * front-end build: each page is one small HTML response.
 *
 * Auth: the admin token, or an admin or viewer token (`ctl tokens create`), is typed into a login form (POST body, never
 * a URL) and traded for a signed session cookie (see `Sessions`); a viewer's session sees every page without the actions.
 * Every state-changing POST needs that session, its CSRF token in a hidden field, and, when the browser sends them, an
 * `Origin` of this host and `Sec-Fetch-Site: same-origin`. The fleet page shows one page of nodes (`api/node-pages.ts`).
 */
export function dashboard(ctl: Controller, keys: KeyRing, adminToken: string, tokens: AccessTokens, opts: DashboardOptions = {}): Router {
  const r = express.Router();
  // Every page of an --insecure-http server carries the warning; `send` reads it here.
  r.use((_req, res, next) => {
    (res.locals as { insecureHttp?: boolean }).insecureHttp = opts.insecureHttp === true;
    next();
  });
  const sessions = new Sessions(adminToken);
  const limiter = new LoginLimiter();
  // Forms are small: a few short fields. The login form is read before anyone is known,
  // so it is the smallest and cheapest of all; the others only after the session checks out.
  const loginForm = bodyParser(express.urlencoded({ extended: false, limit: '4kb', parameterLimit: 8 }), 'form', '4kb');
  const form = bodyParser(express.urlencoded({ extended: false, limit: '16kb', parameterLimit: 32 }), 'form', '16kb');

  /** The session, while its token is still live: revoking a token logs its sessions out. */
  const sessionOf = (req: Request) => {
    const s = sessions.verify(cookieValue(req.headers.cookie, SESSION_COOKIE));
    return s && (s.tokenId === undefined || tokens.live(s.tokenId)) ? s : undefined;
  };
  /** Who opened a session; the bootstrap admin token when it names no token. */
  const whoOf = (s: Session): Principal => (s.tokenId !== undefined ? tokens.live(s.tokenId) : undefined) ?? { role: 'admin', name: 'admin token' };
  /** A viewer's session may look, not act: its action pages and POSTs get a 403 page. */
  const adminOnly = (handler: (req: Request, res: Response, s: Session) => void | Promise<void>) => (req: Request, res: Response, s: Session) => {
    const who = whoOf(s);
    if (who.role !== 'admin') {
      refuse(req, res, 'forbidden', messagePage('Read-only', `${forbidden(who, 'changing a node').message}.`), s);
      return;
    }
    return handler(req, res, s);
  };

  /** Runs `handler` with the session, or sends the visitor to log in. */
  const authed = (handler: (req: Request, res: Response, s: Session) => void | Promise<void>) => (req: Request, res: Response, next: NextFunction) => {
    const s = sessionOf(req);
    if (s) {
      // A handler may answer later (a store write); its rejection is an error like a throw.
      try {
        Promise.resolve(handler(req, res, s)).catch(next);
      } catch (err) {
        next(err);
      }
      return;
    }
    toLogin(req, res);
  };

  /** Stops a request without a session before its body is read: strangers cost no parsing. */
  const sessionFirst = (req: Request, res: Response, next: NextFunction) => {
    if (sessionOf(req)) next();
    else toLogin(req, res);
  };

  /** A visitor without a session: a page is sent to log in; a background refresh gets a 401. */
  const toLogin = (req: Request, res: Response) => {
    headers(res);
    // A background refresh cannot follow a redirect to a form; 401 tells the script to reload.
    if (isFragment(req)) {
      res.status(httpStatus('unauthenticated')).type('text/plain').send('log in again');
      return;
    }
    const back = req.method === 'GET' ? req.originalUrl : '/';
    res.redirect(303, `/login${back === '/' ? '' : `?next=${encodeURIComponent(back)}`}`);
  };

  /** The checks every POST from a logged-in page must pass before it may change anything. */
  const guarded = (handler: (req: Request, res: Response, s: Session) => void | Promise<void>) =>
    authed((req, res, s) => {
      if (!sameOrigin(req) || !sessions.csrfOk(s, (req.body as Record<string, unknown> | undefined)?.csrf)) {
        refuse(
          req,
          res,
          'forbidden',
          messagePage('Request refused', 'This form was stale or came from another site, so nothing was changed. Reload the page and try again.'),
          { csrf: s.csrf },
        );
        return;
      }
      return handler(req, res, s);
    });

  // Browsers ask for it on every page; a 404 in the admin API's JSON would only be noise.
  r.route('/favicon.ico')
    .get((_req, res) => {
      res.status(204).end();
    })
    .all(methodNotAllowed);

  r.route('/login')
    .get((req, res) => {
      const next = safeNext(req.query.next);
      if (sessionOf(req)) {
        res.redirect(303, next);
        return;
      }
      send(req, res, loginPage({ next }), {});
    })
    .post(loginForm, (req, res) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      const next = safeNext(body.next);
      const addr = req.socket.remoteAddress ?? '';
      if (!sameOrigin(req)) {
        refuse(req, res, 'forbidden', loginPage({ next, error: 'This login form came from another site; open the dashboard directly.' }), {});
        return;
      }
      const wait = limiter.blockedFor(addr);
      if (wait > 0) {
        res.setHeader('Retry-After', String(wait));
        refuse(req, res, 'rate_limited', loginPage({ next, error: `Too many wrong tokens; try again in ${Math.ceil(wait / 60)} min.` }), {});
        return;
      }
      const token = typeof body.token === 'string' ? body.token.trim() : '';
      const found = tokens.resolve(token);
      if (!found.ok) {
        limiter.fail(addr);
        refuse(req, res, 'unauthenticated', loginPage({ next, error: 'That is not the admin token, nor a live admin or viewer token.' }), {});
        return;
      }
      limiter.succeed(addr);
      if (found.who.role === 'metrics') {
        refuse(req, res, 'forbidden', loginPage({ next, error: 'A metrics token only scrapes /metrics; log in with an admin or viewer token.' }), {});
        return;
      }
      res.cookie(SESSION_COOKIE, sessions.issue(found.who.tokenId), {
        httpOnly: true,
        sameSite: 'strict',
        // Under --insecure-http the listener is plain http, where a Secure cookie would
        // never be sent back. Over TLS (directly or at a proxy that says so in
        // X-Forwarded-Proto) the cookie must not leak onto plain http. Trusting the header
        // unconditionally is safe here: a forged one can only make the cookie stricter.
        secure: isHttps(req),
        path: '/',
        maxAge: SESSION_TTL_S * 1000,
      });
      res.redirect(303, next);
    })
    .all(methodNotAllowed);

  r.route('/logout')
    .post(
      sessionFirst,
      form,
      guarded((_req, res, s) => {
        sessions.revoke(s);
        res.clearCookie(SESSION_COOKIE, { path: '/' });
        res.redirect(303, '/login');
      }),
    )
    .all(methodNotAllowed);

  r.route('/')
    .get(
      authed(async (req, res, s) => {
        const action = typeof req.query.done === 'string' ? req.query.done : undefined;
        const node = typeof req.query.node === 'string' ? req.query.node : undefined;
        const after = typeof req.query.after === 'string' && req.query.after ? req.query.after.slice(0, 253) : undefined;
        const nodes = await nodePage(ctl, after);
        const page = fleetPage({
          nodes: nodes.views,
          totals: fleetTotals(ctl),
          page: { after, next: nodes.next },
          replicas: replicaViews(ctl),
          models: modelViews(ctl, whoOf(s).role === 'admin'),
          csrf: s.csrf,
          now: new Date(ctl.now()),
          readOnly: whoOf(s).role !== 'admin',
          ...(action && node ? { notice: { action, node } } : {}),
        });
        send(req, res, page, s);
      }),
    )
    .all(methodNotAllowed);

  r.route('/models')
    .get(
      authed((req, res, s) => {
        send(req, res, modelsPage(modelViews(ctl, whoOf(s).role === 'admin'), new Date(ctl.now()), catalogStatusView(opts.catalogStatus, ctl.now())), s);
      }),
    )
    .all(methodNotAllowed);

  r.route('/models/:name')
    .get(
      authed((req, res, s) => {
        const asked = String(req.params.name);
        // Longer names are never a model: no lookup and no suggestion (edit distance grows with the name).
        const m = asked.length <= MAX_MODEL_NAME ? ctl.catalogView.resolve(asked) : undefined;
        if (!m) {
          const close = asked.length <= MAX_MODEL_NAME ? ctl.catalogView.suggest(asked) : [];
          refuse(
            req,
            res,
            'model_not_found',
            messagePage('No such model', `"${echo(asked)}" is not in the catalog${close.length ? ` (did you mean ${close.join(', ')}?)` : ''}.`, {
              href: '/models',
              label: 'All models',
            }),
            s,
          );
          return;
        }
        // An alias gets the canonical page, so there is one address per model.
        if (m.name !== asked) {
          res.redirect(303, `/models/${encodeURIComponent(m.name)}`);
          return;
        }
        const model = modelViews(ctl, whoOf(s).role === 'admin', opts.adapters).find((x) => x.name === m.name)!;
        const rollout = rolloutView(ctl, m, ctl.rollouts.get(m.name));
        const page = {
          model,
          replicas: replicaViews(ctl, m.name, false, opts.adapters),
          explain: explainView(ctl, m.name),
          adapterProblems: Object.fromEntries((m.adapters ?? []).map((a) => [a.name, adapterProblems(ctl, m.name, a.name)])),
          rollout,
          queued: opts.queued?.(m.name),
          now: new Date(ctl.now()),
        };
        send(req, res, modelPage(page), s);
      }),
    )
    .all(methodNotAllowed);

  r.route('/keys')
    .get(
      authed((req, res, s) => {
        send(req, res, keysPage(keys.list(), keys.usageRows(), new Date(ctl.now())), s);
      }),
    )
    .all(methodNotAllowed);

  r.route('/nodes/:id/drain')
    .get(
      authed(
        adminOnly((req, res, s) => {
          const node = nodeViewOf(ctl, String(req.params.id));
          if (!node) {
            refuse(req, res, 'not_found', messagePage('No such node', `There is no node "${echo(String(req.params.id))}".`), s);
            return;
          }
          send(req, res, drainPage({ node, csrf: s.csrf }), s);
        }),
      ),
    )
    .all(methodNotAllowed);

  r.route('/nodes/:id/state')
    .post(
      sessionFirst,
      form,
      guarded(
        adminOnly(async (req, res, s) => {
          const id = String(req.params.id);
          const body = req.body as Record<string, unknown>;
          const action = formText(body.action);
          const state = ACTIONS.get(action);
          if (!state) {
            refuse(req, res, 'invalid_request', messagePage('Unknown action', `"${echo(action)}" is not an action; want cordon, uncordon or drain.`), s);
            return;
          }
          const node = nodeViewOf(ctl, id);
          if (!node) {
            refuse(req, res, 'not_found', messagePage('No such node', `There is no node "${echo(id)}".`), s);
            return;
          }
          const reason = typeof body.reason === 'string' ? body.reason.trim().slice(0, 1024) : '';
          // Draining moves every replica off the node: it takes the confirmation page and a
          // reason, even when the POST is crafted by hand.
          if (state === 'draining' && (body.confirm !== 'yes' || !reason)) {
            refuse(
              req,
              res,
              'missing_field',
              drainPage({ node, csrf: s.csrf, ...(body.confirm === 'yes' ? { error: 'Say why the node is drained.' } : {}) }),
              s,
            );
            return;
          }
          await ctl.setNodeState(id, state, reason || undefined);
          opts.onNodeState?.(whoOf(s).name, id, state);
          res.redirect(303, `/?done=${action}&node=${encodeURIComponent(id)}`);
        }),
      ),
    )
    .all(methodNotAllowed);

  // Errors from dashboard pages answer as pages, not as the admin API's JSON, with the
  // same status the admin API would give them.
  r.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const s = sessionOf(req);
    const e = toDomainError(err);
    refuse(req, res, e.code, messagePage('Something went wrong', e.message), s ? { csrf: s.csrf } : {});
  });

  return r;
}

/** The fleet page's buttons. A Map, so an action such as `constructor` finds nothing inherited. */
const ACTIONS = new Map<string, NodeAdminState>([
  ['cordon', 'cordoned'],
  ['uncordon', 'ready'],
  ['drain', 'draining'],
]);

function isFragment(req: Request): boolean {
  return req.get('x-fragment') === 'main';
}

function headers(res: Response): void {
  res.setHeader('Content-Security-Policy', CSP);
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'same-origin');
  // Pages hold fleet data and a CSRF token: never cache them, and never serve a
  // fragment where a full page was asked for.
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Vary', 'Cookie, X-Fragment');
}

function send(req: Request, res: Response, page: Page, chrome: { csrf?: string }, status = 200): void {
  headers(res);
  res.status(status).type('html');
  const insecureHttp = (res.locals as { insecureHttp?: boolean }).insecureHttp === true;
  res.send(isFragment(req) ? page.main.value : layout(page, { ...chrome, insecureHttp }).value);
}

/** A page that says a request failed, with the status the admin API gives the same code. */
function refuse(req: Request, res: Response, code: ErrorCode, page: Page, chrome: { csrf?: string }): void {
  send(req, res, page, chrome, httpStatus(code));
}

/**
 * A urlencoded form field as text. A field sent twice arrives as a list, which reads as
 * its values joined by commas; a missing one is empty.
 */
function formText(v: unknown): string {
  if (Array.isArray(v)) return v.join(',');
  return typeof v === 'string' ? v : '';
}
