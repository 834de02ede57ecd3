/** A button that copies `text` to the clipboard and says so. */
import { useState } from 'preact/hooks';

export function CopyButton({ text, label }: { text: string; label: string }) {
  const [done, setDone] = useState(false);
  return (
    <button type="button" aria-label={label} onClick={() => void navigator.clipboard.writeText(text).then(() => setDone(true), () => setDone(false))}>
      {done ? 'Copied' : 'Copy'}
    </button>
  );
}
