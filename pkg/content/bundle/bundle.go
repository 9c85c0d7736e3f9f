// Package bundle reads and writes content bundles: one JSON or YAML file
// holding organizations, apps (with their channels), intents, handlers,
// entities, FAQs and knowledge-base documents, as `api import` and
// `api export` move them.
package bundle

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// Format is a bundle's file format.
type Format string

// The formats a bundle can be in.
const (
	JSON Format = "json"
	YAML Format = "yaml"
)

// FormatOf picks the format from a file name, defaulting to JSON.
func FormatOf(name string) Format {
	switch {
	case strings.HasSuffix(name, ".yaml"), strings.HasSuffix(name, ".yml"):
		return YAML
	}
	return JSON
}

// recordLists maps each list of records in a file to its kind, in file order.
var recordLists = [...]struct {
	key  string
	kind content.Kind
}{
	{"intents", content.KindIntent},
	{"handlers", content.KindHandler},
	{"entities", content.KindEntity},
	{"faqs", content.KindFAQ},
	{"documents", content.KindDocument},
}

// File is a bundle read from a file, with where each item came from.
type File struct {
	Bundle content.Bundle
	// sources name each item as the file does, e.g. handlers[3]
	// (intentId "OrderStatus"), per list of the Bundle.
	orgSrc, appSrc, recSrc []string
}

// maxProblems bounds how many problems one read reports.
const maxProblems = 50

// Error lists what is wrong with a bundle, each problem naming the item and
// the JSON path.
type Error struct {
	Problems []string
	// More counts problems beyond those listed.
	More int
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the bundle has %d problem(s):", len(e.Problems)+e.More)
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p)
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "\n  ... and %d more", e.More)
	}
	return b.String()
}

func (e *Error) add(p string) {
	if len(e.Problems) < maxProblems {
		e.Problems = append(e.Problems, p)
	} else {
		e.More++
	}
}

// ReadFile reads the bundle at path, in the format its name says.
func ReadFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open bundle: %w", err)
	}
	defer f.Close()
	file, err := Read(f, FormatOf(path))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return file, nil
}

// Read parses and checks a bundle. Every problem found is reported, not
// only the first.
func Read(r io.Reader, f Format) (*File, error) {
	top, err := decode(r, f)
	if err != nil {
		return nil, err
	}
	root, ok := top.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a bundle must be an object with lists organizations, apps, %s", strings.Join(recordKeys(), ", "))
	}
	b := reader{root: root, seen: map[string]string{}}
	b.checkLists()
	b.organizations()
	b.apps()
	b.records()
	b.tokens()
	if len(b.bad.Problems) > 0 {
		return nil, &b.bad
	}
	return &b.out, nil
}

// reader reads the lists of a decoded bundle into out, gathering every
// problem in bad.
type reader struct {
	root map[string]any
	out  File
	bad  Error
	// seen names where each identifier was first read, by kind and ID.
	seen map[string]string
}

// checkLists reports the lists a bundle does not have.
func (b *reader) checkLists() {
	for key := range b.root {
		if key != "organizations" && key != "apps" && key != "tokens" && !isRecordKey(key) {
			b.bad.add(fmt.Sprintf("%s: unknown list (expected organizations, apps, %s, tokens)", key, strings.Join(recordKeys(), ", ")))
		}
	}
}

// each calls fn with each item of the list key and its path; a missing
// or null list has none.
func (b *reader) each(key string, fn func(v any, path string)) {
	v, present := b.root[key]
	if !present || v == nil {
		return
	}
	list, ok := v.([]any)
	if !ok {
		b.bad.add(key + ": must be a list")
		return
	}
	for i, item := range list {
		fn(item, fmt.Sprintf("%s[%d]", key, i))
	}
}

// report adds the problems of the item at src.
func (b *reader) report(src string, problems []content.Problem) {
	for _, p := range problems {
		b.bad.add(src + ": " + p.Error())
	}
}

// unique reports whether key was not read before, and reports src as a
// duplicate when it was.
func (b *reader) unique(key, src string) bool {
	if first, dup := b.seen[key]; dup {
		b.bad.add(fmt.Sprintf("%s: same identifier as %s", src, first))
		return false
	}
	b.seen[key] = src
	return true
}

func (b *reader) organizations() {
	b.each("organizations", func(v any, path string) {
		src := name(path, v, "id")
		o, problems := content.ParseOrganization(v, "")
		b.report(src, problems)
		if len(problems) == 0 && b.unique("org\x00"+o.ID, src) {
			b.out.Bundle.Organizations = append(b.out.Bundle.Organizations, o)
			b.out.orgSrc = append(b.out.orgSrc, src)
		}
	})
}

func (b *reader) apps() {
	b.each("apps", func(v any, path string) {
		src := name(path, v, "appId")
		a, problems := content.ParseApp(v, "")
		b.report(src, problems)
		if len(problems) == 0 && b.unique("app\x00"+a.ID, src) {
			b.out.Bundle.Apps = append(b.out.Bundle.Apps, a)
			b.out.appSrc = append(b.out.appSrc, src)
		}
	})
}

// records reads the lists of every kind of content record.
func (b *reader) records() {
	for _, l := range recordLists {
		b.each(l.key, func(v any, path string) {
			src := name(path, v, l.kind.IDField())
			rec, problems := content.ParseRecord(l.kind, v, "", "")
			b.report(src, problems)
			if len(problems) == 0 && b.unique(string(l.kind)+"\x00"+rec.AppID+"\x00"+rec.ID, src) {
				b.out.Bundle.Records = append(b.out.Bundle.Records, rec)
				b.out.recSrc = append(b.out.recSrc, src)
			}
		})
	}
}

func (b *reader) tokens() {
	b.each("tokens", func(v any, path string) {
		src := name(path, v, "id")
		tok, problems := content.ParseToken(v, "")
		b.report(src, problems)
		if len(problems) == 0 && b.unique("token\x00"+tok.ID, src) {
			b.out.Bundle.Tokens = append(b.out.Bundle.Tokens, tok)
		}
	})
}

func recordKeys() []string {
	var keys []string
	for _, l := range recordLists {
		keys = append(keys, l.key)
	}
	return keys
}

func isRecordKey(k string) bool {
	for _, l := range recordLists {
		if l.key == k {
			return true
		}
	}
	return false
}

// name is how an item is named in messages: its path and, when it has
// one, its identifier.
func name(path string, v any, idField string) string {
	if m, ok := v.(map[string]any); ok {
		if id, ok := m[idField].(string); ok && id != "" {
			return fmt.Sprintf("%s (%s %q)", path, idField, id)
		}
	}
	return path
}

// Explain rewrites an import failure of one of f's items so that it names
// the item as the file does.
func (f *File) Explain(err error) error {
	var ie *content.ItemError
	if !errors.As(err, &ie) {
		return err
	}
	var src string
	switch srcs := map[content.Section][]string{
		content.SectionOrganizations: f.orgSrc, content.SectionApps: f.appSrc, content.SectionRecords: f.recSrc,
	}[ie.Section]; {
	case ie.Index >= 0 && ie.Index < len(srcs):
		src = srcs[ie.Index]
	default:
		return err
	}
	var p content.Problem
	if errors.As(ie.Err, &p) {
		return fmt.Errorf("%s: %s", src, p.Error())
	}
	return fmt.Errorf("%s: %w", src, ie.Err)
}

// decode reads a JSON or YAML document into JSON-shaped values: objects
// as map[string]any, arrays as []any, numbers as json.Number.
func decode(r io.Reader, f Format) (any, error) {
	if f == YAML {
		var v any
		dec := yaml.NewDecoder(bufio.NewReader(r))
		if err := dec.Decode(&v); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("the bundle is empty")
			}
			return nil, fmt.Errorf("read YAML: %w", err)
		}
		return fromYAML(v, "")
	}
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<16))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the bundle is empty")
		}
		return nil, fmt.Errorf("read JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("read JSON: more than one value in the file")
	}
	return v, nil
}

// fromYAML turns what the YAML decoder produced into JSON-shaped values.
func fromYAML(v any, path string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			c, err := fromYAML(e, joinPath(path, k))
			if err != nil {
				return nil, err
			}
			x[k] = c
		}
		return x, nil
	case map[any]any:
		return nil, fmt.Errorf("%s: keys must be strings", orRoot(path))
	case []any:
		for i, e := range x {
			c, err := fromYAML(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
		return x, nil
	case int:
		return json.Number(strconv.Itoa(x)), nil
	case uint64:
		return json.Number(strconv.FormatUint(x, 10)), nil
	case int64:
		return json.Number(strconv.FormatInt(x, 10)), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%s: %v is not a JSON number", orRoot(path), x)
		}
		return json.Number(strconv.FormatFloat(x, 'g', -1, 64)), nil
	case time.Time:
		// An unquoted date in YAML; JSON has no dates, so it stays text.
		return x.UTC().Format(time.RFC3339Nano), nil
	case string:
		if !utf8.ValidString(x) {
			// As a !!binary value can be; JSON holds only text.
			return nil, fmt.Errorf("%s: is not UTF-8 text", orRoot(path))
		}
		return x, nil
	case nil, bool:
		return x, nil
	}
	return nil, fmt.Errorf("%s: unsupported YAML value %T", orRoot(path), v)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

// Write writes b in the format, lists in file order, each item as it was
// written plus appId (and organizationId for apps); createdAt and
// updatedAt are left out, as an import would ignore them.
func Write(w io.Writer, b *content.Bundle, f Format) error {
	var buf bytes.Buffer
	buf.WriteString("{\n")
	section := func(key string, first bool, items [][]byte) {
		if !first {
			buf.WriteString(",\n")
		}
		fmt.Fprintf(&buf, "%q: [", key)
		for i, it := range items {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString("\n  ")
			buf.Write(it)
		}
		if len(items) > 0 {
			buf.WriteString("\n")
		}
		buf.WriteString("]")
	}
	var orgs, apps [][]byte
	for _, o := range b.Organizations {
		j, err := json.Marshal(map[string]string{"id": o.ID, "name": o.Name})
		if err != nil {
			return err
		}
		orgs = append(orgs, j)
	}
	for _, a := range b.Apps {
		apps = append(apps, exportJSON(content.AppendApp(nil, a)))
	}
	section("organizations", true, orgs)
	section("apps", false, apps)
	for _, l := range recordLists {
		var items [][]byte
		for _, r := range b.Records {
			if r.Kind == l.kind {
				items = append(items, exportJSON(r.AppendJSON(nil, "")))
			}
		}
		section(l.key, false, items)
	}
	if len(b.Tokens) > 0 {
		var items [][]byte
		for _, t := range b.Tokens {
			j, err := json.Marshal(tokenJSON(t))
			if err != nil {
				return err
			}
			items = append(items, j)
		}
		section("tokens", false, items)
	}
	buf.WriteString("\n}\n")
	if f == JSON {
		_, err := w.Write(buf.Bytes())
		return err
	}
	return writeYAML(w, buf.Bytes())
}

// tokenJSON is a token as a bundle holds it: the hash, never a secret.
func tokenJSON(t tenancy.Token) any {
	type tok struct {
		ID             string   `json:"id"`
		Hash           string   `json:"hash"`
		OrganizationID string   `json:"organizationId"`
		AppID          string   `json:"appId,omitempty"`
		Scopes         []string `json:"scopes"`
		Name           string   `json:"name,omitempty"`
		CreatedAt      string   `json:"createdAt"`
		RevokedAt      string   `json:"revokedAt,omitempty"`
	}
	out := tok{ID: t.ID, Hash: hex.EncodeToString(t.Hash), OrganizationID: t.OrganizationID, AppID: t.AppID,
		Scopes: t.Scopes.Names(), Name: t.Name, CreatedAt: t.CreatedAt.UTC().Format(time.RFC3339Nano)}
	if t.Revoked() {
		out.RevokedAt = t.RevokedAt.UTC().Format(time.RFC3339Nano)
	}
	return out
}

// exportJSON drops the fields an export leaves out from a rendered item.
func exportJSON(item []byte) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(item, &m); err != nil {
		return item
	}
	delete(m, "createdAt")
	delete(m, "updatedAt")
	if org, ok := m["organizationId"]; ok && string(org) == `""` {
		delete(m, "organizationId")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m) // raw messages of valid JSON always encode
	return bytes.TrimSpace(buf.Bytes())
}

// yamlReadable escapes, as JSON may, the characters a YAML reader refuses
// in its input (DEL, the C1 controls, U+FFFE and U+FFFF) or reads as a line
// break (NEL), which encoding/json writes as they are. They can only be in
// strings.
func yamlReadable(js []byte) []byte {
	var out []byte
	for i := 0; i < len(js); {
		r, w := utf8.DecodeRune(js[i:])
		if r == 0x7f || 0x80 <= r && r <= 0x9f || r == 0xfffe || r == 0xffff {
			if out == nil {
				out = append(make([]byte, 0, len(js)+16), js[:i]...)
			}
			out = fmt.Appendf(out, `\u%04x`, r)
		} else if out != nil {
			out = append(out, js[i:i+w]...)
		}
		i += w
	}
	if out == nil {
		return js
	}
	return out
}

// NumberError is a number that cannot be written to YAML: read back, it
// would be another number, or text.
type NumberError struct {
	// Path is the number's JSON path in the bundle.
	Path   string
	Number string
}

func (e *NumberError) Error() string {
	return fmt.Sprintf("%s: the number %s would read back from YAML as another value; export as JSON", e.Path, e.Number)
}

// writeYAML re-encodes a JSON bundle as YAML, keeping the list order.
func writeYAML(w io.Writer, js []byte) error {
	var node yaml.Node
	if err := yaml.Unmarshal(yamlReadable(js), &node); err != nil { // JSON is YAML
		return fmt.Errorf("write YAML: %w", err)
	}
	if err := plainStyle(&node, ""); err != nil {
		return fmt.Errorf("write YAML: %w", err)
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&node); err != nil {
		return fmt.Errorf("write YAML: %w", err)
	}
	return enc.Close()
}

// plainStyle drops the flow style a JSON source gives every node, so the
// output reads as block YAML, and refuses numbers YAML cannot carry. path
// is the node's JSON path.
func plainStyle(n *yaml.Node, path string) error {
	if n.Kind == yaml.ScalarNode && n.Style&yaml.DoubleQuotedStyle == 0 && n.Tag != "!!bool" && n.Tag != "!!null" {
		// Unquoted in JSON and not a literal: a number, which YAML
		// readers turn into an int or a float64.
		if !yamlExact(n.Value) {
			return &NumberError{Path: orRoot(path), Number: n.Value}
		}
	}
	n.Style &^= yaml.FlowStyle | yaml.DoubleQuotedStyle
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && needsQuotes(n.Value) {
		n.Style |= yaml.DoubleQuotedStyle
	}
	for i, c := range n.Content {
		p := path
		switch n.Kind {
		case yaml.MappingNode:
			if i%2 == 1 {
				p = joinPath(path, n.Content[i-1].Value)
			}
		case yaml.SequenceNode:
			p = fmt.Sprintf("%s[%d]", path, i)
		}
		if err := plainStyle(c, p); err != nil {
			return err
		}
	}
	return nil
}

// needsQuotes reports whether a string would read back as something else
// unquoted; the encoder quotes most such strings itself, this covers the
// ones it leaves plain (<< would be a merge key).
func needsQuotes(s string) bool {
	return s == "" || s == "<<" || strings.ContainsAny(s, "\n\t") || strings.TrimSpace(s) != s
}

// yamlExact reports whether a JSON number reads back from YAML as the same
// number, as fromYAML spells what the YAML decoder gives.
func yamlExact(num string) bool {
	if _, err := strconv.ParseInt(num, 10, 64); err == nil {
		return true
	}
	if _, err := strconv.ParseUint(num, 10, 64); err == nil {
		return true
	}
	f, err := strconv.ParseFloat(num, 64)
	return err == nil && canonicalNumber(num) == canonicalNumber(strconv.FormatFloat(f, 'g', -1, 64))
}

// canonicalNumber spells a JSON number as its sign, significant digits
// and exponent, so that 1.50, 1.5 and 15e-1 are spelled alike.
func canonicalNumber(s string) string {
	sign := ""
	if rest, neg := strings.CutPrefix(s, "-"); neg {
		sign, s = "-", rest
	}
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil {
			return sign + s // an exponent beyond int: compared as written
		}
		mant, exp = s[:i], e
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	if digits == "" {
		return "0"
	}
	sig := strings.TrimRight(digits, "0")
	return fmt.Sprintf("%s%se%d", sign, sig, exp-len(frac)+len(digits)-len(sig))
}
