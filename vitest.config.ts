import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    reporters: ['default'],
    // `npm run coverage`: V8 coverage of the product code, printed as a per-file table and a summary.
    coverage: {
      provider: 'v8',
      include: ['src/**/*.{ts,js,mjs}'],
      reporter: ['text', 'text-summary'],
    },
  },
});
