import { z } from 'zod';

/** What the machine's screen is right now. Coordinates of every input route live in this space. */
export const Display = z.object({
  width: z.number().int(),
  height: z.number().int(),
  /** Whether the desktop answers. */
  up: z.boolean(),
  resizable: z.boolean(),
});
export type Display = z.infer<typeof Display>;

/** Smallest mode the display accepts; the largest is whatever the X server was started with. */
export const MIN_DISPLAY_WIDTH = 320;
export const MIN_DISPLAY_HEIGHT = 200;

export const ResizeRequest = z.strictObject({
  width: z.number().int().min(MIN_DISPLAY_WIDTH).max(16384),
  height: z.number().int().min(MIN_DISPLAY_HEIGHT).max(16384),
});
export type ResizeRequest = z.infer<typeof ResizeRequest>;

export const ScreenshotFormat = z.enum(['png', 'jpeg', 'webp']);
export type ScreenshotFormat = z.infer<typeof ScreenshotFormat>;

/** A rectangle in display pixels. */
export const ScreenRegion = z.object({
  x: z.number().int().min(0),
  y: z.number().int().min(0),
  width: z.number().int().min(1),
  height: z.number().int().min(1),
});
export type ScreenRegion = z.infer<typeof ScreenRegion>;

/**
 * Extension (not in the spec): how a scaled and/or cropped screenshot maps to the display. A point
 * (ix, iy) of the image is the display point (region.x + ix / scale.x, region.y + iy / scale.y).
 */
export const ScreenshotView = z.object({
  /** The part of the display the image shows (the whole display unless `region` was asked for). */
  region: ScreenRegion,
  /** The image's size in pixels. */
  width: z.number().int().min(1),
  height: z.number().int().min(1),
  /** Image pixels per display pixel on each axis (< 1: scaled down, > 1: zoomed in). */
  scale: z.object({ x: z.number().positive(), y: z.number().positive() }),
});
export type ScreenshotView = z.infer<typeof ScreenshotView>;

export const ScreenshotResult = z.object({
  /** base64 of the encoded frame. */
  image: z.string(),
  format: ScreenshotFormat,
  /** The Display the frame was captured at. */
  display: Display,
  /** Only when the request asked for scaling or a region (extension). */
  view: ScreenshotView.optional(),
});
export type ScreenshotResult = z.infer<typeof ScreenshotResult>;

export const DEFAULT_SCREENSHOT_QUALITY = 80;
