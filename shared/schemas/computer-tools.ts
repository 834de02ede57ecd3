/**
 * Extension (not in the spec): a model's native computer-use tool calls, accepted as they come out of
 * the model and answered with what goes back into it. docs/computer-tools.md.
 */
import { z } from 'zod';
import { MAX_TYPE_TEXT, ScrollDirection } from './input.js';

const Coordinate = z.tuple([z.number().int().min(0).max(16384), z.number().int().min(0).max(16384)]);
const DeclaredSize = z.number().int().min(16).max(16384);

export const ANTHROPIC_ACTIONS = [
  'key',
  'type',
  'mouse_move',
  'left_click',
  'left_click_drag',
  'right_click',
  'middle_click',
  'double_click',
  'triple_click',
  'screenshot',
  'cursor_position',
  'left_mouse_down',
  'left_mouse_up',
  'scroll',
  'hold_key',
  'wait',
  'zoom',
] as const;
export type AnthropicAction = (typeof ANTHROPIC_ACTIONS)[number];

/** The `input` of a `tool_use` block of Anthropic's computer tool (computer_20250124 / computer_20251124). */
export const AnthropicComputerInput = z.object({
  action: z.enum(ANTHROPIC_ACTIONS),
  coordinate: Coordinate.optional(),
  start_coordinate: Coordinate.optional(),
  text: z.string().max(MAX_TYPE_TEXT).optional(),
  scroll_direction: ScrollDirection.optional(),
  scroll_amount: z.number().int().min(0).max(100).optional(),
  /** Seconds (hold_key, wait). */
  duration: z.number().min(0).max(30).optional(),
  /** Modifier key(s) held during a click or scroll, xdotool style ("shift", "ctrl+shift"). */
  key: z.string().max(64).optional(),
  /** zoom: [x0, y0, x1, y1] in the declared display's coordinates. */
  region: z.tuple([z.number().int().min(0), z.number().int().min(0), z.number().int().min(0), z.number().int().min(0)]).optional(),
});
export type AnthropicComputerInput = z.infer<typeof AnthropicComputerInput>;

export const AnthropicToolRequest = z.strictObject({
  tool: z.enum(['computer_20250124', 'computer_20251124']).default('computer_20250124'),
  /**
   * The display size declared to the model in the tool definition. Omitted: the size the reference
   * implementation would declare for the current display (docs/computer-tools.md).
   */
  display_width_px: DeclaredSize.optional(),
  display_height_px: DeclaredSize.optional(),
  /** computer_20251124's `enable_zoom`: without it a zoom action is refused like the API would. */
  enable_zoom: z.boolean().default(false),
  input: AnthropicComputerInput,
});
export type AnthropicToolRequest = z.infer<typeof AnthropicToolRequest>;

export const ToolResultContent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text'), text: z.string() }),
  z.object({
    type: z.literal('image'),
    source: z.object({ type: z.literal('base64'), media_type: z.literal('image/png'), data: z.string() }),
  }),
]);

/** The content of the `tool_result` block to send back (the caller adds `tool_use_id`). */
export const AnthropicToolResult = z.object({
  content: z.array(ToolResultContent),
  is_error: z.boolean(),
  /** The declared display size the coordinates and screenshots were scaled to. */
  display_width_px: z.number().int(),
  display_height_px: z.number().int(),
});
export type AnthropicToolResult = z.infer<typeof AnthropicToolResult>;

// ------------------------------------------------------------------------------------------------
// OpenAI computer use: the `action` of a `computer_call` output item → a `computer_call_output` item.
// ------------------------------------------------------------------------------------------------

const Px = z.number().int().min(0).max(16384);
export const OpenAIComputerAction = z.discriminatedUnion('type', [
  z.object({ type: z.literal('click'), x: Px, y: Px, button: z.enum(['left', 'right', 'wheel', 'back', 'forward']).default('left') }),
  z.object({ type: z.literal('double_click'), x: Px, y: Px }),
  z.object({ type: z.literal('drag'), path: z.array(z.object({ x: Px, y: Px })).min(2).max(200) }),
  z.object({ type: z.literal('keypress'), keys: z.array(z.string().min(1).max(32)).min(1).max(8) }),
  z.object({ type: z.literal('move'), x: Px, y: Px }),
  z.object({ type: z.literal('screenshot') }),
  z.object({ type: z.literal('scroll'), x: Px, y: Px, scroll_x: z.number().int().min(-100_000).max(100_000), scroll_y: z.number().int().min(-100_000).max(100_000) }),
  z.object({ type: z.literal('type'), text: z.string().min(1).max(MAX_TYPE_TEXT) }),
  z.object({ type: z.literal('wait') }),
]);
export type OpenAIComputerAction = z.infer<typeof OpenAIComputerAction>;

export const OpenAIToolRequest = z.strictObject({
  /** The computer_call's call_id, echoed in the output item. */
  call_id: z.string().max(200).optional(),
  /** The display size declared in the tool (display_width/display_height); omitted: the machine's own. */
  display_width: DeclaredSize.optional(),
  display_height: DeclaredSize.optional(),
  action: OpenAIComputerAction,
});
export type OpenAIToolRequest = z.infer<typeof OpenAIToolRequest>;

export const OpenAIToolResult = z.object({
  type: z.literal('computer_call_output'),
  call_id: z.string().nullable(),
  output: z.object({ type: z.literal('computer_screenshot'), image_url: z.string() }),
});
export type OpenAIToolResult = z.infer<typeof OpenAIToolResult>;
