/**
 * The schema of the cause catalog (`catalog.json`, see its `description` for the match rules) and its validator.
 * Separate from causes.ts so that matching findings against the built-in catalog never loads zod; a user-supplied
 * catalog (and the test of the built-in one) goes through {@link parseCatalog}.
 */
import semver from 'semver';
import { z } from 'zod';
import { ErrorCode, TokenwatchError } from '../errors.js';

const versionRange = z.union([
  z.strictObject({ from: z.string().min(1).optional(), below: z.string().min(1).optional() }),
  z.string().refine((r) => semver.validRange(r) !== null, 'not a valid semver range (npm semver syntax, e.g. ">=6.0.0 <6.1.0")'),
]);
const regexString = z.string().refine((s) => {
  try {
    new RegExp(s);
    return true;
  } catch {
    return false;
  }
}, 'not a valid regular expression');

/**
 * A setting that switches an entry's fix off again (e.g. Calico's `CALICO_MANAGE_CNI=false`): an env var of a
 * container (`env`, with the literal `values` that undo the fix, compared case-insensitively) or a command-line flag
 * (`arg`, matched as a whole argument or as `arg=…` with one of `values`). `source` is the public page that says so.
 */
const fixUndoneBy = z
  .strictObject({
    env: z.string().min(1).optional(),
    arg: z.string().min(1).optional(),
    values: z.array(z.string()).min(1),
    note: z.string().min(1),
    fix: z.string().min(1),
    source: z.url(),
  })
  .refine((s) => (s.env === undefined) !== (s.arg === undefined), 'exactly one of env or arg');

const catalogEntry = z.strictObject({
  id: z.string().min(1),
  component: z.string().min(1),
  name: z.string().min(1),
  cause: z.enum(['static-token-file', 'client-caches-token', 'refresh-on-401']),
  match: z.strictObject({
    images: z.array(z.string().min(1)).optional(),
    versions: z.array(versionRange).min(1).optional(),
    versionNote: z.string().min(1).optional(),
    excludeImages: z.array(z.string().min(1)).optional(),
    excludeCommands: z.array(z.string().min(1)).optional(),
    excludeNote: z.string().min(1).optional(),
    unlessAllArgs: z.array(z.string().min(1)).min(1).optional(),
    unlessArgsNote: z.string().min(1).optional(),
    userAgents: z.array(z.string().min(1)).optional(),
    userAgentVersion: regexString.optional(),
    podLabels: z.array(z.string().min(1)).optional(),
    serviceAccounts: z.array(z.strictObject({ namespace: z.string().min(1).optional(), name: z.string().min(1) })).optional(),
  }),
  fixedIn: z.string().min(1).nullable(),
  /** Settings that undo the fix of `fixedIn`: a version past the fix with one of them set is still affected. */
  fixUndoneBy: z.array(fixUndoneBy).min(1).optional(),
  /** A fact added to the evidence whenever the entry matches (e.g. which library is *not* to blame). */
  evidenceNote: z.string().min(1).optional(),
  summary: z.string().min(1),
  fix: z.string().min(1),
  sources: z.array(z.url()).min(1),
});

const catalogSchema = z.strictObject({
  version: z.literal(1),
  description: z.string().optional(),
  entries: z.array(catalogEntry),
});

/** One known offender (see `catalog.json` `description` for the match rules). */
export type CatalogEntryShape = z.infer<typeof catalogEntry>;
/** The cause catalog: entries matched in order, first match wins. */
export type CauseCatalogShape = z.infer<typeof catalogSchema>;

/**
 * Validates a catalog document (the shape of `catalog.json`).
 * @throws TokenwatchError (code `internal`) listing every problem (bad field, bad URL, bad regex, duplicate id).
 * @internal The product trusts the catalog as shipped (src/findings/causes.ts); the test runs this on `catalog.json`,
 *   so the schema that defines the catalog's types also checks the file (exempt from the production knip pass).
 */
export function parseCatalog(json: unknown): CauseCatalogShape {
  const parsed = catalogSchema.safeParse(json);
  if (!parsed.success) throw new TokenwatchError(ErrorCode.Internal, `invalid cause catalog:\n${z.prettifyError(parsed.error)}`);
  const seen = new Set<string>();
  for (const e of parsed.data.entries) {
    if (seen.has(e.id)) throw new TokenwatchError(ErrorCode.Internal, `invalid cause catalog: duplicate entry id "${e.id}"`);
    seen.add(e.id);
  }
  return parsed.data;
}
