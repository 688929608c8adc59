// One version source: gpu_notebook/__init__.py's __version__ (read by hatch for the wheel).
// package.json must carry the same version; `--write` copies it over, otherwise a mismatch fails.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const init = readFileSync(join(here, '..', 'gpu_notebook', '__init__.py'), 'utf8');
const match = init.match(/^__version__\s*=\s*["']([^"']+)["']/m);
if (!match) {
  console.error('check-version: no __version__ in gpu_notebook/__init__.py');
  process.exit(1);
}
// PEP 440 pre-releases (0.2.0a1) map to semver (0.2.0-alpha.1) as the extension template does.
const python = match[1];
const semver = python
  .replace(/a(\d+)$/, '-alpha.$1')
  .replace(/b(\d+)$/, '-beta.$1')
  .replace(/rc(\d+)$/, '-rc.$1');
const pkgPath = join(here, 'package.json');
const pkg = JSON.parse(readFileSync(pkgPath, 'utf8'));
if (pkg.version === semver) {
  process.exit(0);
}
if (process.argv.includes('--write')) {
  pkg.version = semver;
  writeFileSync(pkgPath, JSON.stringify(pkg, null, 2) + '\n');
  console.log(`check-version: package.json version set to ${semver}`);
  process.exit(0);
}
console.error(
  `check-version: package.json has ${pkg.version} but gpu_notebook.__version__ is ${python}; ` +
    'run `node scripts/check-version.mjs --write`'
);
process.exit(1);
