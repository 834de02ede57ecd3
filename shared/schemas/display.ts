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

export const ScreenshotResult = z.object({
  /** base64 of the encoded frame. */
  image: z.string(),
  format: ScreenshotFormat,
  /** The Display the frame was captured at. */
  display: Display,
});
export type ScreenshotResult = z.infer<typeof ScreenshotResult>;

export const DEFAULT_SCREENSHOT_QUALITY = 80;
