import type { Context } from 'hono';
import { isIdOf } from '../../../../../shared/ids.js';
import type { CpEnv } from '../../../context.js';
import { ERRORS } from '../../../errors.js';

export function previewIdParam(c: Context<CpEnv>): string {
  const id = c.req.param('preview_id') ?? '';
  if (!isIdOf('preview', id)) throw ERRORS.noSuchPublishedPort();
  return id;
}
