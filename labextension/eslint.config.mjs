// Lint for the labextension (run by `jlpm test`); formatting is prettier's job.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['lib/', 'build-test/', 'node_modules/', '.yarn/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }
      ],
      eqeqeq: 'error',
      'no-restricted-properties': [
        'error',
        { property: 'innerHTML', message: 'Set text, never HTML: sources come from user cells.' }
      ]
    }
  },
  {
    files: ['**/*.mjs'],
    languageOptions: { globals: { console: 'readonly', process: 'readonly' } }
  }
);
