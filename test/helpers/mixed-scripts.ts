/**
 * Issue 26's long typing text: 1,000 characters cycling through 34 distinct ones of nine scripts (Latin,
 * Cyrillic, Greek, CJK, Hangul, Arabic, Hebrew, Devanagari, Thai). Under the US layout 29 of them are not
 * on the keyboard (everything but a, b, c, space and the full stop), so each needs a keycode bound to it.
 */
export const NINE_SCRIPT_CHARS = [
  'a', 'b', 'c', 'é', ' ', '.',
  'ж', 'д', 'я', 'щ',
  'λ', 'Ω', 'π', 'ψ',
  '漢', '字', '日', '本',
  '한', '국', '어', '글',
  'ع', 'ر', 'ب',
  'ש', 'ל', 'ם',
  'न', 'म', 'स',
  'ก', 'ข', 'ค',
];

/** `n` characters cycling through NINE_SCRIPT_CHARS. */
export function nineScriptText(n = 1000): string {
  let s = '';
  for (let i = 0; i < n; i++) s += NINE_SCRIPT_CHARS[i % NINE_SCRIPT_CHARS.length];
  return s;
}
