// Package graphql serves POST /cms/graphql: create, read, update and
// delete of an app's intents, handlers and entities with graphql-go, with
// the same tokens as the REST API, limits on request size, depth and
// complexity, and a GraphiQL page for people.
package graphql

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	gql "github.com/graphql-go/graphql"
	"github.com/graphql-go/graphql/gqlerrors"
	"github.com/graphql-go/graphql/language/ast"
	"github.com/graphql-go/graphql/language/location"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/auth/authhttp"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/ratelimit"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// Handler is the GraphQL endpoint.
type Handler struct {
	// resolvers are the schema's.
	resolvers *resolvers
	schema    gql.Schema
	cost      *costModel
	authn     authhttp.Authenticator
	limiter   *ratelimit.Limiter
	limits    Limits
	budget    *answerBudget
	rules     []gql.ValidationRuleFn
	log       *slog.Logger
}

// New builds the endpoint. changed is called with the app and the token
// of every successful mutation, so that readers see the change at once
// and the work it causes is charged to who made it; limiter may be nil.
func New(limits Limits, store Store, authn authhttp.Authenticator, limiter *ratelimit.Limiter, changed func(appID, tokenID string), log *slog.Logger) (*Handler, error) {
	if changed == nil {
		changed = func(string, string) {}
	}
	limits = limits.withDefaults()
	r := &resolvers{store: store, apps: authn, changed: changed, webhookAllow: limits.WebhookAllow,
		publishes: ratelimit.New(float64(limits.PublishesPerMinute)/60, limits.PublishesPerMinute, time.Now), publishLimit: limits.PublishesPerMinute}
	schema, err := newSchema(r)
	if err != nil {
		return nil, fmt.Errorf("build GraphQL schema: %w", err)
	}
	h := &Handler{resolvers: r, schema: schema, authn: authn, limiter: limiter, limits: limits, rules: validationRules(), log: log}
	h.budget = newAnswerBudget(h.limits.AnswerBudgetBytes)
	h.cost = &costModel{schema: &h.schema, listSize: int64(h.limits.ListSize)}
	return h, nil
}

// OnQueued sets what is told when a mutation queued a webhook delivery
// again (the deliverer's Wake); set before serving.
func (h *Handler) OnQueued(fn func()) { h.resolvers.queued = fn }

// request is a GraphQL request as POSTed.
type request struct {
	Query         string         `json:"query"`
	Variables     map[string]any `json:"variables"`
	OperationName string         `json:"operationName"`
}

// result is what the endpoint answers.
type result struct {
	Data   any                        `json:"data,omitempty"`
	Errors []gqlerrors.FormattedError `json:"errors,omitempty"`
}

func writeResult(w http.ResponseWriter, status int, r result) {
	httpserve.WriteJSON(w, status, r)
}

func writeError(w http.ResponseWriter, status int, e *codedError) {
	writeResult(w, status, result{Errors: []gqlerrors.FormattedError{{Message: e.msg, Extensions: e.Extensions()}}})
}

// ServeHTTP implements http.Handler. A request goes through named steps,
// each of which answers and stops it when it fails: admit (method, token,
// rate, scopes), parse (body, document, the operation's scope,
// validation), choose (the operation), bound (depth, fields, cost) and
// execute.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, ok := h.admit(w, r)
	if !ok {
		return
	}
	req, d, ok := h.parse(w, r, p)
	if !ok {
		return
	}
	op, ok := h.choose(w, r, d.ast, req.OperationName)
	if !ok {
		return
	}
	numbersOfVariables(op, req.Variables)
	root, ok := h.bound(w, d, op, req.Variables)
	if !ok {
		return
	}
	h.execute(w, r, p, d, req, root)
}

// admit checks the method, the token, its rate and that it may use
// GraphQL at all, before the request is read. GraphiQL's page is served
// here too, to a browser asking for it.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request) (auth.Principal, bool) {
	switch r.Method {
	case http.MethodGet:
		if r.URL.Query().Get("query") == "" && strings.Contains(r.Header.Get("Accept"), "text/html") {
			serveGraphiQL(w, r)
			return auth.Principal{}, false
		}
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, errorf(CodeBadRequest, "", "use POST (or GET for queries)"))
		return auth.Principal{}, false
	}
	p, err := authhttp.Admit(r.Context(), h.authn, h.limiter, r.Header)
	if err != nil {
		h.authFailed(w, err)
		return auth.Principal{}, false
	}
	// A token that can neither read nor write content is refused before
	// its request is read; which of the two an operation needs is checked
	// once it is known.
	if p.Scopes&(tenancy.ContentRead|tenancy.ContentWrite) == 0 {
		writeScopeError(w, p.Require(tenancy.ContentRead, "GraphQL queries"))
		return auth.Principal{}, false
	}
	return p, true
}

// authFailed answers a request whose token could not be authenticated.
func (h *Handler) authFailed(w http.ResponseWriter, err error) {
	refusal := authhttp.Refuse(err)
	if refusal.Err != nil {
		h.log.Error("authentication failed", "err", err)
	}
	writeRefusal(w, refusal)
}

// parse reads the request and its document, checks that p may run the
// operation it names, and validates the document against the schema.
func (h *Handler) parse(w http.ResponseWriter, r *http.Request, p auth.Principal) (request, *document, bool) {
	req, status, cerr := h.read(w, r)
	if cerr != nil {
		writeError(w, status, cerr)
		return request{}, nil, false
	}
	d, rerr := parseQuery(req.Query, h.limits, h.log)
	if rerr != nil {
		writeResult(w, rerr.status, result{Errors: rerr.errs})
		return request{}, nil, false
	}
	// Scopes are checked before the document is validated, so that a token
	// learns nothing of the operations it may not run.
	if op := operation(d.ast, req.OperationName); op != nil {
		need, what := tenancy.ContentRead, "GraphQL queries"
		if op.Operation == ast.OperationTypeMutation {
			need, what = tenancy.ContentWrite, "GraphQL mutations"
		}
		if err := p.Require(need, what); err != nil {
			writeScopeError(w, err)
			return request{}, nil, false
		}
		if need == tenancy.ContentWrite && !p.Scopes.Has(tenancy.ContentRead) {
			if f := readsBack(d.ast, op); f != nil {
				writeScopeError(w, p.Require(tenancy.ContentRead, fmt.Sprintf(
					"reading %q back from a mutation's result (without it select only IDs, createdAt, updatedAt and __typename)", f.Name.Value)))
				return request{}, nil, false
			}
		}
	}
	if v := h.validate(d.ast); !v.IsValid {
		d.relocate(v.Errors)
		for i := range v.Errors {
			v.Errors[i].Extensions = map[string]any{"code": CodeValidationFailed}
		}
		writeResult(w, http.StatusBadRequest, result{Errors: v.Errors})
		return request{}, nil, false
	}
	if errs := d.mergeable(); len(errs) > 0 {
		writeResult(w, http.StatusBadRequest, result{Errors: errs})
		return request{}, nil, false
	}
	return req, d, true
}

// choose picks the operation to run: the one named, or the only one. A
// subscription is refused, and so is a mutation sent by GET.
func (h *Handler) choose(w http.ResponseWriter, r *http.Request, doc *ast.Document, name string) (*ast.OperationDefinition, bool) {
	op := operation(doc, name)
	if op == nil {
		msg := "the request has several operations; name one in operationName"
		if name != "" {
			msg = fmt.Sprintf("no operation named %q", name)
		}
		writeError(w, http.StatusBadRequest, errorf(CodeBadRequest, "operationName", "%s", msg))
		return nil, false
	}
	if op.Operation == ast.OperationTypeSubscription {
		writeError(w, http.StatusBadRequest, errorf(CodeValidationFailed, "", "subscriptions are not supported; use a query or a mutation"))
		return nil, false
	}
	if r.Method == http.MethodGet && op.Operation == ast.OperationTypeMutation {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, errorf(CodeMutationNotAllowed, "", "mutations need POST; GET may only run queries"))
		return nil, false
	}
	return op, true
}

// bound refuses an operation that nests too deep, selects too many fields
// or costs too much, before anything runs; it returns the weight of the
// operation's root, from which execution counts what it makes.
func (h *Handler) bound(w http.ResponseWriter, d *document, op *ast.OperationDefinition, vars map[string]any) (weight, bool) {
	doc := d.ast
	switch sh := measure(doc, op, h.limits.MaxFields); {
	case sh.depth > h.limits.MaxDepth:
		writeError(w, http.StatusBadRequest, errorf(CodeQueryTooDeep, "", "the request nests fields %d deep; at most %d is allowed", sh.depth, h.limits.MaxDepth))
		return weight{}, false
	case sh.metaDepth > h.limits.MaxIntrospectionDepth:
		writeError(w, http.StatusBadRequest, errorf(CodeQueryTooDeep, "", "the request nests introspection fields %d deep; at most %d is allowed (GRAPHQL_MAX_INTROSPECTION_DEPTH)",
			sh.metaDepth, h.limits.MaxIntrospectionDepth))
		return weight{}, false
	case sh.fields > h.limits.MaxFields:
		writeError(w, http.StatusBadRequest, errorf(CodeQueryTooComplex, "", "the request selects more than %d fields", h.limits.MaxFields))
		return weight{}, false
	}
	c := h.cost.measure(doc, op, vars, h.limits.MaxCost)
	if c.cost > int64(h.limits.MaxCost) {
		writeResult(w, http.StatusBadRequest, result{Errors: []gqlerrors.FormattedError{h.tooCostly(d, c)}})
		return weight{}, false
	}
	// Introspection was counted exactly; the fields of content are
	// counted again as their objects are made, those of the root here.
	frags := map[string]ast.Definition{}
	for _, d := range doc.Definitions {
		if f, ok := d.(*ast.FragmentDefinition); ok && f.Name != nil {
			frags[f.Name.Value] = f
		}
	}
	rootType := h.schema.QueryType()
	if op.Operation == ast.OperationTypeMutation {
		rootType = h.schema.MutationType()
	}
	root := weigh(rootType, []*ast.SelectionSet{op.SelectionSet}, frags)
	if total := addCost(root.fields, c.meta); total > int64(h.limits.MaxCost) {
		// Only a name repeated, which the estimate counts once, gets here.
		msg := fmt.Sprintf("the request makes %d selections at its root, each counted where a name repeats", root.fields)
		if c.meta > 0 {
			msg += fmt.Sprintf(", and introspection costing %d", c.meta)
		}
		writeError(w, http.StatusBadRequest, errorf(CodeQueryTooComplex, "", "%s: more than the %d allowed (GRAPHQL_MAX_COST)", msg, h.limits.MaxCost))
		return weight{}, false
	}
	root.fields = addCost(root.fields, c.meta)
	return root, true
}

// execute runs the operation, charges p's token for the answer's size
// and answers, unless the answer grew past what the limits allow.
func (h *Handler) execute(w http.ResponseWriter, r *http.Request, p auth.Principal, d *document, req request, root weight) {
	x := newExecution(h.limits, root, h.budget, spender{org: p.OrganizationID, app: p.AppID, token: p.TokenID}, p.Scopes.Has(tenancy.ContentWrite))
	defer x.release() // once the answer is written
	var res *gql.Result
	if x.start() {
		res = gql.Execute(gql.ExecuteParams{
			Schema: h.schema, AST: d.ast, OperationName: req.OperationName, Args: req.Variables,
			Context: withExecution(withPrincipal(auth.Acting(r.Context(), p), p), x),
		})
	}
	// The answer's size is its work: the token pays for it beyond the one
	// request Allow counted.
	h.limiter.Charge(p.TokenID, requests(x.answered()))
	if ref, applied := x.refusedAt(); ref != nil {
		status := http.StatusUnprocessableEntity
		switch ref.err.code {
		case CodeRateLimited:
			status = http.StatusTooManyRequests
		case CodeUnavailable:
			status = http.StatusServiceUnavailable
		}
		if status != http.StatusUnprocessableEntity {
			// Answers being built now end within moments.
			httpserve.RetryAfter(w, 1)
		}
		writeResult(w, status, result{Errors: []gqlerrors.FormattedError{refused(d, ref, applied)}})
		return
	}
	d.relocate(res.Errors)
	if variableErrors(res.Errors) {
		// Variables that do not fit their types stop the request before
		// anything runs, as a validation error does.
		writeResult(w, http.StatusBadRequest, result{Errors: res.Errors})
		return
	}
	body, err := json.Marshal(result{Data: res.Data, Errors: expand(res.Errors)})
	switch {
	case err != nil:
		h.log.Error("GraphQL answer could not be encoded", "err", err)
		writeError(w, http.StatusInternalServerError, errorf(CodeInternal, "", "the answer could not be encoded"))
	case int64(len(body)) > x.maxBytes:
		// Introspection, which is bounded by its cost, is not charged
		// while resolving; this bounds what was not.
		writeError(w, http.StatusUnprocessableEntity, errorf(CodeAnswerTooLarge, "",
			"the answer is %d bytes, larger than %d bytes (%s); select fewer fields, aliases or records", len(body), x.maxBytes, x.bytesLimit))
	default:
		writeBody(w, http.StatusOK, body)
	}
}

// tooCostly is the error for a request whose cost is over the limit.
func (h *Handler) tooCostly(d *document, c costReport) gqlerrors.FormattedError {
	cost := fmt.Sprint(c.cost)
	if c.more {
		cost = fmt.Sprintf("more than %d", max(c.cost, int64(h.limits.MaxCost)))
	}
	msg := fmt.Sprintf("the request costs %s, more than the %d allowed (GRAPHQL_MAX_COST): the cost is the number of fields its answer may hold, "+
		"each list of content counted as %d items (GRAPHQL_LIST_SIZE) and introspection as the schema answers it",
		cost, h.limits.MaxCost, h.limits.ListSize)
	ext := map[string]any{"code": CodeQueryTooComplex, "cost": c.cost, "maxCost": h.limits.MaxCost}
	fe := gqlerrors.FormattedError{Extensions: ext}
	if c.at != nil {
		msg += "; the costliest field is " + pathString(c.path)
		ext["costliestField"] = pathString(c.path)
		if c.at.Loc != nil {
			fe.Locations = []location.SourceLocation{d.locate(c.at.Loc.Start)}
		}
	}
	fe.Message = msg
	return fe
}

// refused is the error for an answer refused while it was resolved.
func refused(d *document, ref *refusal, applied []string) gqlerrors.FormattedError {
	msg := ref.err.msg
	if len(applied) > 0 {
		msg += fmt.Sprintf("; mutations applied: %s", strings.Join(applied, ", "))
	}
	fe := gqlerrors.FormattedError{Message: msg, Path: ref.path, Extensions: ref.err.Extensions()}
	if len(applied) > 0 {
		fe.Extensions["applied"] = applied
	}
	if ref.field != nil && ref.field.Loc != nil {
		fe.Locations = []location.SourceLocation{d.locate(ref.field.Loc.Start)}
	}
	return fe
}

// writeBody sends an answer already encoded, as httpserve.WriteJSON does.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// writeScopeError answers a request its token's scopes do not allow.
func writeScopeError(w http.ResponseWriter, err error) { writeRefusal(w, authhttp.Refuse(err)) }

// writeRefusal answers a request refused for its token, as every service
// does (authhttp.Refusal), in GraphQL's error shape.
func writeRefusal(w http.ResponseWriter, refusal authhttp.Refusal) {
	refusal.SetHeaders(w)
	writeError(w, refusal.Status, fromRefusal(refusal))
}

// malformed is the message for a query graphql-go's parser or validator
// panicked on; its parser lets a few malformed documents through.
const malformed = "the request is malformed"

// validate runs graphql-go's validation rules, answering a document they
// panic on as invalid rather than dropping the connection.
func (h *Handler) validate(doc *ast.Document) (res gql.ValidationResult) {
	defer func() {
		if p := recover(); p != nil {
			h.log.Error("GraphQL validation failed", "panic", p, "stack", string(debug.Stack()))
			res = gql.ValidationResult{Errors: []gqlerrors.FormattedError{{Message: malformed}}}
		}
	}()
	return gql.ValidateDocument(&h.schema, doc, h.rules)
}

// read takes the request from a POST body or GET parameters.
func (h *Handler) read(w http.ResponseWriter, r *http.Request) (request, int, *codedError) {
	var req request
	if r.Method == http.MethodGet {
		q := r.URL.Query()
		req.Query, req.OperationName = q.Get("query"), q.Get("operationName")
		if v := q.Get("variables"); v != "" {
			if err := decodeJSON(strings.NewReader(v), &req.Variables); err != nil {
				return req, http.StatusBadRequest, errorf(CodeBadRequest, "variables", "variables: not a JSON object: %v", err)
			}
		}
	} else {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.limits.MaxBodyBytes))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return req, http.StatusRequestEntityTooLarge, errorf(CodeRequestTooLarge, "", "the request body is larger than %d bytes", h.limits.MaxBodyBytes)
		case err != nil:
			return req, http.StatusBadRequest, errorf(CodeBadRequest, "", "read the request body: %v", err)
		}
		if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
			return req, http.StatusBadRequest, errorf(CodeBadRequest, "", "batched requests (a JSON array) are not supported; send one request per POST")
		}
		if err := decodeJSON(bytes.NewReader(body), &req); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				member, _, _ := strings.Cut(te.Field, ".")
				want := "a string"
				if member == "variables" {
					want = "an object"
				}
				return req, http.StatusBadRequest, errorf(CodeBadRequest, member, "%s: must be %s, not %s", member, want, jsonKind(te.Value))
			}
			if errors.As(err, &te) {
				err = fmt.Errorf("not %s", jsonKind(te.Value))
			}
			return req, http.StatusBadRequest, errorf(CodeBadRequest, "", "the body must be a JSON object with query, variables and operationName: %v", err)
		}
	}
	if strings.TrimSpace(req.Query) == "" {
		return req, http.StatusBadRequest, errorf(CodeBadRequest, "query", "query is required")
	}
	return req, 0, nil
}

// jsonKind names a kind of JSON value as encoding/json reports it.
func jsonKind(v string) string {
	switch v {
	case "array", "object":
		return "an " + v
	case "string", "number":
		return "a " + v
	case "bool":
		return "a boolean"
	}
	return v
}

// decodeJSON keeps numbers as written, so that free-form values are
// stored exactly as sent.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more than one JSON value")
	}
	return nil
}
