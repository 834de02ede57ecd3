/**
 * Coordinate and screenshot scaling of Anthropic's computer-use reference implementation
 * (anthropic-quickstarts, computer-use-demo/computer_use_demo/tools/computer.py, `scale_coordinates`),
 * reproduced exactly: the model sees a screen scaled to the declared size; its coordinates are scaled
 * up with Python's round() (half to even) of x / (declared / actual), and positions reported back
 * (cursor_position) are scaled down with round(x * factor).
 */

/** The reference's MAX_SCALING_TARGETS, in its order (XGA, WXGA, FWXGA). */
export const MAX_SCALING_TARGETS = [
  { width: 1024, height: 768 },
  { width: 1280, height: 800 },
  { width: 1366, height: 768 },
] as const;

/** Python 3 round(): to the nearest integer, ties to even. */
export function pyRound(v: number): number {
  const f = Math.floor(v);
  const diff = v - f;
  if (diff < 0.5) return f;
  if (diff > 0.5) return f + 1;
  return f % 2 === 0 ? f : f + 1;
}

/**
 * The size the reference declares for an actual screen: the first target whose aspect ratio is within
 * 0.02 of the screen's, if it is narrower than the screen; otherwise the screen itself (no scaling).
 */
export function referenceDeclaredSize(width: number, height: number): { width: number; height: number } {
  const ratio = width / height;
  for (const d of MAX_SCALING_TARGETS) {
    if (Math.abs(d.width / d.height - ratio) < 0.02) {
      if (d.width < width) return { width: d.width, height: d.height };
      break;
    }
  }
  return { width, height };
}

export class Scaler {
  private readonly fx: number;
  private readonly fy: number;

  constructor(
    readonly screen: { width: number; height: number },
    readonly declared: { width: number; height: number },
  ) {
    // The reference's factors: declared / actual ("should be less than 1").
    this.fx = declared.width / screen.width;
    this.fy = declared.height / screen.height;
  }

  /** A point the model gave (declared space) → the display; null when outside the declared screen. */
  toScreen(x: number, y: number): { x: number; y: number } | null {
    if (x > this.declared.width || y > this.declared.height) return null;
    const sx = pyRound(x / this.fx);
    const sy = pyRound(y / this.fy);
    // The declared edge itself (x == width) scales to one past the last pixel: keep it on screen.
    return { x: Math.min(sx, this.screen.width - 1), y: Math.min(sy, this.screen.height - 1) };
  }

  /** A display point → the model's space. */
  toApi(x: number, y: number): { x: number; y: number } {
    return { x: pyRound(x * this.fx), y: pyRound(y * this.fy) };
  }
}
