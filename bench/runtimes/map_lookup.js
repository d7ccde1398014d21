// SPDX-License-Identifier: MIT
// map_lookup.js - V8's heap: a Map of 3 M entries, then 2 M random lookups. Prints the lookup seconds and a
// checksum (docs/runtimes.md).
const n = 3000000; const m = new Map();
for (let i = 0; i < n; i++) m.set(i * 7919, 'v' + i);
let s = 0; const t = process.hrtime.bigint();
for (let j = 0; j < 2000000; j++) { const k = Math.floor(Math.random() * n) * 7919; s += m.get(k).length; }
console.log(Number(process.hrtime.bigint() - t) / 1e9, s);
