/** `tokenwatch scan --probe-report FILE`: reads saved node-probe ConfigMaps (see `objects.ts` {@link reportsFromJson}). */
import { readFile, stat } from 'node:fs/promises';
import { InputError } from '../errors.js';
import type { ProbeReport } from './host.js';
import { reportsFromJson } from './objects.js';

/** Largest probe-report file read, bytes. */
export const MAX_PROBE_REPORT_BYTES = 64 * 1024 * 1024;

/**
 * Reads the probe reports of a saved `kubectl get configmaps … -o json`.
 * @throws {InputError} naming the file: unreadable, too large, not JSON, or not a ConfigMap list.
 */
export async function probeReportsFromFile(file: string): Promise<ProbeReport[]> {
  let text: string;
  try {
    const st = await stat(file);
    if (st.size > MAX_PROBE_REPORT_BYTES) throw new InputError(file, `larger than ${MAX_PROBE_REPORT_BYTES} bytes`);
    text = await readFile(file, 'utf8');
  } catch (err) {
    if (err instanceof InputError) throw err;
    throw new InputError(file, err instanceof Error ? err.message : String(err), { cause: err });
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new InputError(file, 'not JSON');
  }
  try {
    return reportsFromJson(doc);
  } catch (err) {
    throw new InputError(file, err instanceof Error ? err.message : String(err), { cause: err });
  }
}
