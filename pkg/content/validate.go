package content

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/assistantcms/cms/pkg/tenancy"
)

// Problem is one thing wrong with written content, at a JSON path such as
// handlers[3].content.OrderStatus[0].
type Problem struct {
	Path    string
	Message string
}

func (p Problem) Error() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// checker collects problems while reading a decoded JSON value (objects as
// map[string]any, arrays as []any).
type checker struct{ problems []Problem }

func (c *checker) add(path, format string, a ...any) {
	c.problems = append(c.problems, Problem{Path: path, Message: fmt.Sprintf(format, a...)})
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return "a number"
}

// str reads an optional string field; required ones must be non-empty.
func (c *checker) str(obj map[string]any, key, path string, required bool) string {
	v, ok := obj[key]
	if !ok || v == nil {
		if required {
			c.add(join(path, key), "is required")
		}
		return ""
	}
	s, isStr := v.(string)
	switch {
	case !isStr:
		c.add(join(path, key), "must be a string, not %s", typeName(v))
	case required && strings.TrimSpace(s) == "":
		c.add(join(path, key), "must not be empty")
	}
	return s
}

// id reads a required identifier.
func (c *checker) id(obj map[string]any, key, path string) string {
	s := c.str(obj, key, path, true)
	if s == "" {
		return ""
	}
	switch {
	case len(s) > tenancy.MaxIDLength:
		c.add(join(path, key), "is longer than %d bytes", tenancy.MaxIDLength)
	case !utf8.ValidString(s):
		c.add(join(path, key), "is not valid UTF-8")
	case strings.ContainsRune(s, '/'):
		c.add(join(path, key), "must not contain '/', since it appears in URL paths")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		c.add(join(path, key), "must not contain control characters")
	default:
		return s
	}
	return ""
}

func (c *checker) object(v any, path string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		c.add(path, "must be an object, not %s", typeName(v))
	}
	return m, ok
}

// MaxNesting bounds how deeply arrays and objects nest in a document,
// the document itself being the first level: SQLite refuses JSON nested
// more than 1000 deep, and content that one backend takes must move to
// the other.
const MaxNesting = 128

// MaxNumberDigits bounds how many digits a number has written out without
// an exponent, as PostgreSQL stores it: 1e200000 overflows its numeric
// type, and 1e100000 would be stored as 100,001 digits. Every float64
// fits.
const MaxNumberDigits = 400

// storable refuses what a backend cannot store: U+0000 anywhere in a
// document, keys included (PostgreSQL cannot store it), nesting deeper
// than MaxNesting and numbers longer than MaxNumberDigits written out.
// level is the nesting of v.
func (c *checker) storable(v any, path string, level int) {
	switch v := v.(type) {
	case string:
		if strings.ContainsRune(v, 0) {
			c.add(path, "must not contain the NUL character (U+0000)")
		}
	case json.Number:
		if d := plainDigits(string(v)); d < 0 || d > MaxNumberDigits {
			c.add(path, "is a number of more than %d digits written out without an exponent", MaxNumberDigits)
		}
	case map[string]any:
		if level > MaxNesting {
			c.add(path, "nests arrays and objects more than %d deep", MaxNesting)
			return
		}
		for _, k := range sortedKeys(v) {
			if strings.ContainsRune(k, 0) {
				c.add(join(path, strings.ReplaceAll(k, "\x00", `\u0000`)), "must not contain the NUL character (U+0000) in its name")
				continue
			}
			c.storable(v[k], join(path, k), level+1)
		}
	case []any:
		if level > MaxNesting {
			c.add(path, "nests arrays and objects more than %d deep", MaxNesting)
			return
		}
		for i, x := range v {
			c.storable(x, fmt.Sprintf("%s[%d]", path, i), level+1)
		}
	}
}

// plainDigits is how many digits a JSON number has written out without an
// exponent, or -1 when its exponent is beyond any bound.
func plainDigits(n string) int {
	n = strings.TrimPrefix(n, "-")
	mant, exp := n, 0
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		e, err := strconv.Atoi(n[i+1:])
		if err != nil || e > 1<<20 || e < -1<<20 {
			return -1
		}
		mant, exp = n[:i], e
	}
	whole, frac, _ := strings.Cut(mant, ".")
	return max(len(whole)+exp, 1) + max(len(frac)-exp, 0)
}

// field returns an optional member; ok is false when it is absent or null.
func field(obj map[string]any, key string) (any, bool) {
	v, ok := obj[key]
	return v, ok && v != nil
}

func (c *checker) optObject(obj map[string]any, key, path string) map[string]any {
	v, ok := field(obj, key)
	if !ok {
		return nil
	}
	m, _ := c.object(v, join(path, key))
	return m
}

func (c *checker) optArray(obj map[string]any, key, path string) []any {
	v, ok := field(obj, key)
	if !ok {
		return nil
	}
	a, isArr := v.([]any)
	if !isArr {
		c.add(join(path, key), "must be an array, not %s", typeName(v))
	}
	return a
}

func (c *checker) strings(obj map[string]any, key, path string) []string {
	var out []string
	for i, v := range c.optArray(obj, key, path) {
		s, ok := v.(string)
		if !ok {
			c.add(index(join(path, key), i), "must be a string, not %s", typeName(v))
			continue
		}
		out = append(out, s)
	}
	return out
}

func (c *checker) objects(obj map[string]any, key, path string, each func(m map[string]any, path string)) {
	for i, v := range c.optArray(obj, key, path) {
		p := index(join(path, key), i)
		if m, ok := c.object(v, p); ok && each != nil {
			each(m, p)
		}
	}
}

func (c *checker) boolean(obj map[string]any, key, path string) {
	if v, ok := field(obj, key); ok {
		if _, isBool := v.(bool); !isBool {
			c.add(join(path, key), "must be a boolean, not %s", typeName(v))
		}
	}
}

// ownerID reads the appId (or organizationId) of a record: taken from the
// document, or given by the caller, and then they must agree.
func (c *checker) ownerID(obj map[string]any, key, path, given string) string {
	if given == "" {
		return c.id(obj, key, path)
	}
	if v, ok := field(obj, key); ok && v != given {
		c.add(join(path, key), "is %v, but the record is written to %q", v, given)
	}
	return given
}

// ParseRecord checks v, a decoded JSON object, as a record of kind and
// returns it ready to store. appID is the app the record is written to;
// when empty the record's own appId field names it. path prefixes the
// paths of the problems found.
func ParseRecord(kind Kind, v any, appID, path string) (Record, []Problem) {
	var c checker
	obj, ok := c.object(v, path)
	if !ok {
		return Record{}, c.problems
	}
	c.storable(obj, path, 1)
	r := Record{Kind: kind}
	r.AppID = c.ownerID(obj, "appId", path, appID)
	r.ID = c.id(obj, kind.IDField(), path)
	switch kind {
	case KindIntent:
		c.intent(obj, path)
	case KindHandler:
		c.intent(obj, path)
		c.handler(obj, path)
	case KindEntity:
		c.str(obj, "displayName", path, false)
		if t := c.str(obj, "type", path, false); t != "" && t != "REGEX" && t != "VALUE_SYNONYMS" {
			c.add(join(path, "type"), "must be REGEX or VALUE_SYNONYMS, not %q", t)
		}
		c.objects(obj, "values", path, func(m map[string]any, p string) {
			c.str(m, "name", p, true)
			c.str(m, "canonicalId", p, false)
			c.strings(m, "synonyms", p)
		})
	case KindFAQ:
		c.str(obj, "name", path, false)
		if len(c.strings(obj, "questions", path)) == 0 {
			if _, present := field(obj, "questions"); !present {
				c.add(join(path, "questions"), "is required")
			} else {
				c.add(join(path, "questions"), "must hold at least one question")
			}
		}
		c.str(obj, "answer", path, true)
		c.str(obj, "url", path, false)
	case KindDocument:
		c.str(obj, "title", path, false)
		c.str(obj, "uri", path, false)
		c.str(obj, "document", path, true)
		r.Location = c.str(obj, "location", path, false)
	default:
		c.add(path, "unknown kind of record %q", kind)
	}
	if len(c.problems) > 0 {
		return Record{}, c.problems
	}
	doc, err := canonical(obj, nil)
	if err != nil {
		return Record{}, []Problem{{Path: path, Message: err.Error()}}
	}
	r.Doc = doc
	return r, nil
}

func (c *checker) intent(obj map[string]any, path string) {
	c.str(obj, "name", path, false)
	c.strings(obj, "utterancePatterns", path)
	c.objects(obj, "slots", path, func(m map[string]any, p string) {
		c.str(m, "name", p, true)
		c.str(m, "type", p, true)
		c.boolean(m, "isList", p)
	})
	c.objects(obj, "contexts", path, func(m map[string]any, p string) { c.str(m, "name", p, true) })
}

func (c *checker) handler(obj map[string]any, path string) {
	c.str(obj, "type", path, false)
	content := c.optObject(obj, "content", path)
	for _, key := range sortedKeys(content) {
		c.objects(content, key, join(path, "content"), nil)
	}
	for _, paths := range []string{"forward", "redirect"} {
		m := c.optObject(obj, paths, path)
		for _, key := range sortedKeys(m) {
			c.objects(m, key, join(path, paths), func(p map[string]any, pp string) {
				c.str(p, "intentId", pp, true)
			})
		}
	}
	c.optObject(obj, "data", path)
}

// ParseApp checks v, a decoded JSON object, as an app.
func ParseApp(v any, path string) (tenancy.App, []Problem) {
	var c checker
	obj, ok := c.object(v, path)
	if !ok {
		return tenancy.App{}, c.problems
	}
	c.storable(obj, path, 1)
	a := tenancy.App{ID: c.id(obj, "appId", path), OrganizationID: c.id(obj, "organizationId", path)}
	a.Name = c.str(obj, "name", path, true)
	c.strings(obj, "examplePhrases", path)
	c.strings(obj, "keywords", path)
	keys := map[string]int{}
	c.objects(obj, "channels", path, func(m map[string]any, p string) {
		ch := tenancy.Channel{ID: c.id(m, "id", p), Type: c.str(m, "type", p, false), Key: c.str(m, "key", p, false)}
		if ch.Key != "" {
			if _, dup := keys[ch.Key]; dup {
				c.add(join(p, "key"), "%q is the key of another channel of this app", ch.Key)
			}
			keys[ch.Key]++
		}
		a.Channels = append(a.Channels, ch)
	})
	if len(c.problems) > 0 {
		return tenancy.App{}, c.problems
	}
	doc, err := canonical(obj, []string{"name"})
	if err != nil {
		return tenancy.App{}, []Problem{{Path: path, Message: err.Error()}}
	}
	a.Doc = doc
	return a, nil
}

// ParseOrganization checks v, a decoded JSON object, as an organization.
func ParseOrganization(v any, path string) (tenancy.Organization, []Problem) {
	var c checker
	obj, ok := c.object(v, path)
	if !ok {
		return tenancy.Organization{}, c.problems
	}
	c.storable(obj, path, 1)
	o := tenancy.Organization{ID: c.id(obj, "id", path), Name: c.str(obj, "name", path, true)}
	for _, k := range sortedKeys(obj) {
		if k != "id" && k != "name" && !IsServerField(k) {
			c.add(join(path, k), "is not a field of an organization (id, name)")
		}
	}
	return o, c.problems
}

// ParseToken reads an access token as an export with tokens writes it:
// its ID, the SHA-256 of the whole token in hex (never the secret), its
// owners, name and times.
func ParseToken(v any, path string) (tenancy.Token, []Problem) {
	var c checker
	obj, ok := c.object(v, path)
	if !ok {
		return tenancy.Token{}, c.problems
	}
	c.storable(obj, path, 1)
	t := tenancy.Token{ID: c.id(obj, "id", path), OrganizationID: c.id(obj, "organizationId", path),
		AppID: c.str(obj, "appId", path, false), Name: c.str(obj, "name", path, false)}
	if h := c.str(obj, "hash", path, true); h != "" {
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
			c.add(join(path, "hash"), "must be %d hexadecimal characters (a SHA-256)", 2*sha256.Size)
		} else {
			t.Hash = b
		}
	}
	t.CreatedAt = c.time(obj, "createdAt", path, true)
	t.RevokedAt = c.time(obj, "revokedAt", path, false)
	// A bundle exported before tokens had scopes carries tokens that
	// could do what LegacyScopes allows, and still may.
	t.Scopes = tenancy.LegacyScopes
	if _, ok := field(obj, "scopes"); ok {
		t.Scopes = 0
		for i, name := range c.strings(obj, "scopes", path) {
			one, err := tenancy.ParseScopes(name)
			if err != nil || strings.ContainsAny(name, ", \t\n") {
				c.add(index(join(path, "scopes"), i), "%q is not a scope (%s)", name, strings.Join(tenancy.ScopeNames(), ", "))
				continue
			}
			t.Scopes |= one
		}
		if t.Scopes == 0 && len(c.problems) == 0 {
			c.add(join(path, "scopes"), "must name at least one scope (%s)", strings.Join(tenancy.ScopeNames(), ", "))
		}
	}
	for _, k := range sortedKeys(obj) {
		switch k {
		case "id", "hash", "organizationId", "appId", "scopes", "name", "createdAt", "revokedAt":
		default:
			c.add(join(path, k), "is not a field of a token (id, hash, organizationId, appId, scopes, name, createdAt, revokedAt)")
		}
	}
	return t, c.problems
}

// time reads an RFC 3339 time; optional ones may be absent.
func (c *checker) time(obj map[string]any, key, path string, required bool) time.Time {
	s := c.str(obj, key, path, required)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		c.add(join(path, key), "must be an RFC 3339 time, such as 2026-01-02T15:04:05Z")
		return time.Time{}
	}
	if t = t.UTC(); t.Year() < 0 || t.Year() > 9999 {
		// Written back in UTC, it would have no four-digit year, and
		// would not read again.
		c.add(join(path, key), "must be a time between the years 0000 and 9999 in UTC")
		return time.Time{}
	}
	return t
}

// canonical encodes obj without the server-managed fields and the drop
// list, keys sorted, HTML characters unescaped.
func canonical(obj map[string]any, drop []string) (json.RawMessage, error) {
	m := make(map[string]any, len(obj))
	for k, v := range obj {
		if !IsServerField(k) && !slices.Contains(drop, k) {
			m[k] = v
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("cannot be encoded as JSON: %w", err)
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// builtinSlotTypes are slot types that name no entity of the app: common
// system types of NLU services.
var builtinSlotTypes = map[string]bool{
	"NUMBER": true, "DATE": true, "TIME": true, "DATETIME": true, "DURATION": true,
	"EMAIL": true, "PHONE_NUMBER": true, "URL": true, "ANY": true, "TEXT": true,
}

// IsBuiltinSlotType reports whether a slot type is a built-in one rather
// than an entityId: one of NUMBER, DATE, TIME, DATETIME, DURATION, EMAIL,
// PHONE_NUMBER, URL, ANY, TEXT, or a name with an AMAZON., @sys. or sys.
// prefix.
func IsBuiltinSlotType(t string) bool {
	return builtinSlotTypes[t] || strings.HasPrefix(t, "AMAZON.") || strings.HasPrefix(t, "@sys.") || strings.HasPrefix(t, "sys.")
}
