import { createHash } from 'node:crypto';

/**
 * The dashboard's CSS and its one script, inlined into each full page (a few KB; the
 * 5-second refreshes fetch only `<main>`, without them). Both are constants, so the
 * Content-Security-Policy allows exactly them by hash and nothing else inline.
 */
export const CSS = `
:root{--fg:#16191d;--muted:#4a5361;--bg:#f6f7f9;--card:#fff;--line:#d5dae1;--link:#0a58ad;--accent:#1d4ed8;
--ok-bg:#e3f4e8;--ok:#11572f;--warn-bg:#fff1cc;--warn:#5c4300;--bad-bg:#fde5e5;--bad:#8a1c1c;
--used:#1d4ed8;--free:#e4f3ea;--free-line:#2b7a4b;--sick:#b42318;font-size:15px}
*{box-sizing:border-box}
body{margin:0;font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans",sans-serif;color:var(--fg);background:var(--bg);line-height:1.45}
a{color:var(--link)}
a:focus-visible,button:focus-visible,input:focus-visible,textarea:focus-visible,.wrap:focus-visible{outline:3px solid #f59e0b;outline-offset:2px}
.skip{position:absolute;left:-9999px;top:0;background:#fff;padding:.5rem 1rem;z-index:10}
.skip:focus{left:.5rem;top:.5rem}
header{background:#111827;color:#fff;display:flex;flex-wrap:wrap;align-items:center;gap:.25rem 1.25rem;padding:.55rem 1.25rem}
header .brand{font-weight:700;font-size:1.1rem;color:#fff;text-decoration:none;margin-right:.5rem}
header nav ul{display:flex;gap:.25rem;list-style:none;margin:0;padding:0;flex-wrap:wrap}
header nav a{color:#e5e7eb;text-decoration:none;padding:.35rem .65rem;border-radius:6px;display:inline-block}
header nav a:hover{background:#1f2937}
header nav a[aria-current=page]{background:#374151;color:#fff;font-weight:600}
header form{margin-left:auto}
.banner{margin:0;padding:.5rem 1.25rem;background:var(--bad-bg);color:var(--bad);font-weight:600}
.alert{margin:.5rem 0 1rem;padding:.5rem 1rem;border-left:4px solid var(--bad);background:var(--bad-bg)}
header button{background:transparent;color:#e5e7eb;border:1px solid #6b7280;border-radius:6px;padding:.3rem .7rem;font:inherit;cursor:pointer}
main{max-width:1400px;margin:0 auto;padding:1rem 1.25rem 2rem}
main:focus{outline:none}
h1{font-size:1.45rem;margin:.25rem 0 .75rem}
h2{font-size:1.15rem;margin:1.5rem 0 .5rem}
h3{font-size:1rem;margin:1rem 0 .4rem}
h4{font-size:.95rem;margin:.75rem 0 .3rem;color:var(--muted)}
p{margin:.4rem 0}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em}
.muted,.updated{color:var(--muted)}
.updated{font-size:.85rem;margin-top:1.25rem}
.tiles{display:flex;flex-wrap:wrap;gap:.75rem;margin:0 0 1rem;padding:0;list-style:none}
.tiles li{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.5rem .9rem;min-width:9rem}
.tiles b{display:block;font-size:1.35rem}
.wrap{overflow-x:auto;background:var(--card);border:1px solid var(--line);border-radius:8px}
table{border-collapse:collapse;width:100%;font-size:.92rem}
th,td{text-align:left;padding:.5rem .65rem;border-bottom:1px solid var(--line);vertical-align:top}
thead th{background:#eef1f5;font-weight:600;white-space:nowrap}
tbody th{font-weight:600;white-space:nowrap}
tbody tr:last-child>*{border-bottom:0}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.nowrap{white-space:nowrap}
.badge{display:inline-block;border-radius:999px;padding:.05rem .55rem;font-size:.8rem;font-weight:600;white-space:nowrap;border:1px solid transparent}
.ok{background:var(--ok-bg);color:var(--ok);border-color:#9fd3b0}
.warn{background:var(--warn-bg);color:var(--warn);border-color:#e8c766}
.bad{background:var(--bad-bg);color:var(--bad);border-color:#f0a8a8}
.plain{background:#eef1f5;color:var(--fg);border-color:var(--line)}
.chip{display:inline-block;background:#eef1f5;border:1px solid var(--line);border-radius:4px;padding:0 .35rem;margin:0 .2rem .2rem 0;font-size:.8rem;white-space:nowrap}
.sub{display:block;font-size:.8rem;color:var(--muted);white-space:normal;max-width:22rem}
th .sub{font-weight:400}
thead .sub{white-space:nowrap;max-width:none}
.gpubar{display:flex;gap:2px;width:9rem;height:.9rem;margin:.2rem 0}
.gpubar span{flex:1;border-radius:2px;border:1px solid transparent}
.gpubar .used{background:var(--used)}
.gpubar .free{background:var(--free);border-color:var(--free-line)}
.gpubar .sick{background:repeating-linear-gradient(45deg,var(--sick) 0 3px,#f8d0cc 3px 6px);border-color:var(--sick)}
.legend{display:flex;flex-wrap:wrap;gap:1rem;font-size:.82rem;color:var(--muted);margin:.4rem 0 0}
.legend span::before{content:"";display:inline-block;width:.8rem;height:.8rem;border-radius:2px;margin-right:.3rem;vertical-align:-.1rem;border:1px solid transparent}
.legend .used::before{background:var(--used)}
.legend .free::before{background:var(--free);border-color:var(--free-line)}
.legend .sick::before{background:var(--sick)}
meter{width:6rem;height:.7rem;display:block;margin:.2rem 0 0 auto}
.actions{display:flex;gap:.35rem;flex-wrap:wrap}
.actions form{margin:0}
.btn,button.btn{display:inline-block;font:inherit;font-size:.85rem;padding:.25rem .65rem;border-radius:6px;border:1px solid #9aa4b2;background:#fff;color:var(--fg);cursor:pointer;text-decoration:none;white-space:nowrap}
.btn:hover{background:#eef1f5}
.btn.primary{background:var(--accent);border-color:var(--accent);color:#fff}
.btn.danger{background:#b42318;border-color:#b42318;color:#fff}
.notice{background:var(--ok-bg);border:1px solid #9fd3b0;color:var(--ok);padding:.5rem .8rem;border-radius:6px;margin:0 0 1rem}
.error{background:var(--bad-bg);border:1px solid #f0a8a8;color:var(--bad);padding:.5rem .8rem;border-radius:6px;margin:.5rem 0}
.problems{margin:.5rem 0;padding-left:1.2rem}
.problems li{margin:.15rem 0}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:1rem 1.2rem;max-width:34rem}
.card label{display:block;font-weight:600;margin:.6rem 0 .25rem}
.card input,.card textarea{width:100%;font:inherit;padding:.45rem .55rem;border:1px solid #8a94a3;border-radius:6px}
.card .hint{font-size:.85rem;color:var(--muted)}
.card .row{display:flex;gap:.5rem;align-items:center;margin-top:1rem;flex-wrap:wrap}
.login{min-height:70vh;display:flex;align-items:center;justify-content:center}
.profile{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.25rem 1rem .75rem;margin:.75rem 0}
@media (max-width:640px){main{padding:.75rem .6rem 1.5rem}header{padding:.5rem .75rem}h1{font-size:1.25rem}.tiles li{min-width:calc(50% - .5rem);flex:1}}
`;

/**
 * Swaps in a fresh `<main>` every 5 s: the same URL, asked for with `X-Fragment: main`.
 * It waits while the tab is hidden and while the keyboard's focus is inside `<main>`
 * (not a mouse click on a scrolling table), so a keyboard or screen-reader user is not
 * thrown back to the top, and reloads when the session ended (the server then sends
 * the login page). Without JS the page is still complete.
 */
export const SCRIPT = `
(()=>{const m=document.getElementById('main');if(!m||!m.hasAttribute('data-refresh'))return;let busy=false;
const kb=(a)=>{try{return a.matches(':focus-visible')}catch(e){return true}};
setInterval(async()=>{const a=document.activeElement;
if(busy||document.hidden||(a&&a!==m&&m.contains(a)&&(a.matches('input,textarea,select')||kb(a))))return;busy=true;
try{const r=await fetch(location.href,{headers:{'X-Fragment':'main'},credentials:'same-origin',cache:'no-store'});
if(r.status===401){location.reload();return}if(r.ok)m.innerHTML=await r.text()}catch(e){}finally{busy=false}},5000)})();
`;

const sha = (s: string) => `'sha256-${createHash('sha256').update(s).digest('base64')}'`;

/**
 * No inline style attributes, no event handlers, no other origins: what a stray
 * unescaped string could do is nothing. `frame-ancestors 'none'` stops clickjacking of
 * the drain button.
 */
export const CSP = [
  "default-src 'none'",
  `style-src ${sha(CSS)}`,
  `script-src ${sha(SCRIPT)}`,
  "connect-src 'self'",
  "img-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');
