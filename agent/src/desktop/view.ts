/**
 * Which part of the display a screenshot shows and at what size (extension: server-side scaling and
 * zoom). Pure: the planned view is checked against the display before anything is captured.
 */
import { type FieldError } from '../../../shared/errors.js';
import type { ScreenRegion, ScreenshotView } from '../../../shared/schemas/display.js';
import { ERRORS } from '../errors.js';

export interface ViewRequest {
  width?: number;
  height?: number;
  max_side?: number;
  region?: ScreenRegion;
}

/** null when nothing but the plain screenshot was asked for (the spec's answer, no `view`). */
export function planView(display: { width: number; height: number }, q: ViewRequest): ScreenshotView | null {
  if (q.width === undefined && q.height === undefined && q.max_side === undefined && q.region === undefined) return null;
  const details: FieldError[] = [];
  if (q.max_side !== undefined && (q.width !== undefined || q.height !== undefined)) {
    details.push({ field: 'max_side', message: 'cannot be combined with width or height' });
  }
  const region = q.region ?? { x: 0, y: 0, width: display.width, height: display.height };
  if (region.x + region.width > display.width || region.y + region.height > display.height) {
    details.push({ field: 'region', message: `must lie inside the ${display.width}x${display.height} display` });
  }
  if (details.length) throw ERRORS.badScreenshotView(details);
  let width = region.width;
  let height = region.height;
  if (q.width !== undefined && q.height !== undefined) {
    width = q.width;
    height = q.height;
  } else if (q.width !== undefined) {
    width = q.width;
    height = Math.max(1, Math.round((region.height * q.width) / region.width));
  } else if (q.height !== undefined) {
    height = q.height;
    width = Math.max(1, Math.round((region.width * q.height) / region.height));
  } else if (q.max_side !== undefined && Math.max(region.width, region.height) > q.max_side) {
    const f = q.max_side / Math.max(region.width, region.height);
    width = Math.max(1, Math.round(region.width * f));
    height = Math.max(1, Math.round(region.height * f));
  }
  return { region, width, height, scale: { x: width / region.width, y: height / region.height } };
}
