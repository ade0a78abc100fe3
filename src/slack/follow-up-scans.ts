/**
 * When the follow-up scans run (`src/slack/followups.ts` reminders, escalations and outcomes to the requester, then
 * `src/slack/paging.ts` pages): after any tracked work of the Slack integration (a click, a vote, a sweep, a poll, a
 * rollout) and on the sweep timer; one at a time, once more when asked during one (docs/slack.md).
 */
import type { Logger } from '../observability/logger.js';
import type { Tasks } from './tasks.js';

/** What {@link FollowUpScans} runs and where it reports. */
export interface FollowUpScansDeps {
  /** The follow-ups' scan (`FollowUps.scan`). */
  followUps: { scan(): Promise<unknown> };
  /** The paging scan, when paging is configured (read at each scan: it may be built after this). */
  paging: () => { scan(): Promise<unknown> } | undefined;
  /** Where a scan is tracked (not with the integration's `track`, so a scan does not schedule another). */
  tasks: Tasks;
  /** True once the integration stops: no scan starts any more. */
  stopped: () => boolean;
  logger: Logger;
}

/** Runs the follow-up scans on request, one at a time (see the module doc). */
export class FollowUpScans {
  private scanning: Promise<void> | undefined;
  private again = false;

  constructor(private readonly deps: FollowUpScansDeps) {}

  /** Asks for a scan: starts one now, or one more after the running one. A failed scan is logged. Never throws. */
  request(): void {
    const { deps } = this;
    if (deps.stopped()) return;
    if (this.scanning) {
      this.again = true;
      return;
    }
    this.scanning = deps.tasks.track(
      (async () => {
        do {
          this.again = false;
          await deps.followUps.scan();
          await deps.paging()?.scan();
        } while (this.again && !deps.stopped());
      })()
        .catch((err: unknown) => deps.logger.error({ err }, 'the follow-up scan (reminders, escalations, outcomes, paging) failed'))
        .finally(() => {
          this.scanning = undefined;
        }),
    );
  }
}
