'use strict';
// node's semver package (Debian's node-semver) as the reference for hoist's semver scheme: reads a file of
// version strings, one per line, and prints one line for each: "-" when semver.valid() refuses it, else the
// rank of its precedence among the valid ones by semver.compare() (0 the lowest; equal precedence, equal rank).
const fs = require('fs');
const semver = require('/usr/share/nodejs/semver');

const texts = fs.readFileSync(process.argv[2], 'latin1').split('\n');
texts.pop();  // the empty string after the last newline
const valid = [];
texts.forEach((text, index) => {
  if (semver.valid(text) !== null) {
    valid.push(index);
  }
});
valid.sort((a, b) => semver.compare(texts[a], texts[b]));
const ranks = new Array(texts.length).fill('-');
let rank = 0;
valid.forEach((index, position) => {
  if (position > 0 && semver.compare(texts[valid[position - 1]], texts[index]) !== 0) {
    ++rank;
  }
  ranks[index] = String(rank);
});
process.stdout.write(ranks.join('\n') + '\n');
