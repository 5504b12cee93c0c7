import { isUnknownValue } from './values.js';

/** Names without a size in them that NVIDIA sells in more than one memory size. */
const MULTI_SIZE_MODELS = /^(?:V100|A100|A800|H100|H800|H200|H20|GH200|B100|B200|GB200|B300)$/i;
/** Brand words that say nothing about capability. */
const BRAND_WORDS = /^(?:NVIDIA|Tesla|GeForce|Quadro)$/i;
/** Form factor and memory-type words: an SXM and a PCIe A100-80GB place the same. */
const PACKAGING_WORDS = /^(?:SXM\d*|PCIe|HBM\d*e?|NVL|Generation)$/i;
const SIZE_WORD = /^(\d+)GB$/i;

/**
 * A short class for a GPU name, used by profiles' `gpu_class`: brand and packaging
 * words dropped, the model kept, and the memory size appended where the model comes
 * in several sizes ("NVIDIA A100-SXM4-40GB" → "A100-40GB", "NVIDIA GeForce RTX 4090" →
 * "RTX-4090", "NVIDIA H200" with 143771 MiB → "H200-141GB"). "unknown" for no name.
 */
export function gpuClass(name: string, memoryMb?: number): string {
  if (isUnknownValue(name) || name.trim().toLowerCase() === 'unknown') return 'unknown';
  const words = name
    .trim()
    .split(/[\s-]+/)
    .filter((w) => w !== '');
  let size: string | undefined;
  const model: string[] = [];
  for (const w of words) {
    const sized = SIZE_WORD.exec(w);
    if (sized) {
      size ??= `${sized[1]}GB`;
    } else if (!BRAND_WORDS.test(w) && !PACKAGING_WORDS.test(w)) {
      model.push(w);
    }
  }
  if (model.length === 0) return 'unknown';
  // Marketing sizes are GiB rounded up: 81559 MiB → 80, 143771 → 141, 95830 → 94.
  if (size === undefined && model.length === 1 && MULTI_SIZE_MODELS.test(model[0] ?? '') && memoryMb && memoryMb > 0) {
    size = `${Math.ceil(memoryMb / 1024)}GB`;
  }
  return size === undefined ? model.join('-') : `${model.join('-')}-${size}`;
}
