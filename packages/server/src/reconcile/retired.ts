import type { Plan } from './plan.js';

/**
 * Step 1: replicas nothing asks for any more — their model or profile left the catalog,
 * or they stopped. Runs first, so a replica that is also failed or on a lost node is
 * removed for the reason that makes replacing it pointless.
 */
export function retired(plan: Plan): void {
  for (const r of plan.live()) {
    const model = plan.models.get(r.model);
    if (!model) plan.remove(r, 'model-gone', `model ${r.model} is no longer in the catalog`);
    else if (!model.profiles.some((p) => p.name === r.profile)) plan.remove(r, 'profile-gone', `profile ${r.profile} is no longer in model ${r.model}`);
    else if (r.state === 'stopped') plan.remove(r, 'stopped', 'stopped');
  }
}
