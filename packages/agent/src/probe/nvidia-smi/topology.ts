/**
 * True when `nvidia-smi topo -m` shows an NVLink (`NV<n>`) between any two GPUs.
 * Columns are matched to the header by position; the header has no row label, so it
 * starts with an empty cell (a leading tab, or nothing when the output is not tabbed).
 */
export function parseTopoNvlink(text: string): boolean {
  const lines = text.split('\n').map((l) => l.replace(/\r$/, ''));
  const split = (line: string): string[] => (line.includes('\t') ? line.split('\t').map((c) => c.trim()) : line.trim().split(/\s+/));
  // The header is the first line that names a GPU; rows come after it.
  const headerLine = lines.find((l) => /(^|\s)GPU\d+(\s|$)/.test(l));
  if (headerLine === undefined) return false;
  const header = split(headerLine);
  if (header[0] !== '') header.unshift('');
  const gpuColumns = header.flatMap((label, i) => (/^GPU\d+$/.test(label) ? [i] : []));
  for (const line of lines) {
    const cells = split(line);
    if (!/^GPU\d+$/.test(cells[0] ?? '')) continue;
    if (gpuColumns.some((i) => /^NV\d+$/.test(cells[i] ?? ''))) return true;
  }
  return false;
}
