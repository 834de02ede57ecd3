import type { Context } from 'hono';
import { AppError } from '../../../../../shared/errors.js';
import { isIdOf } from '../../../../../shared/ids.js';
import type { CpEnv } from '../../../context.js';

export function previewIdParam(c: Context<CpEnv>): string {
  const id = c.req.param('preview_id') ?? '';
  if (!isIdOf('preview', id)) throw new AppError('not_found', 'No such published port.');
  return id;
}
