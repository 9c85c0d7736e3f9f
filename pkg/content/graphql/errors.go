package graphql

import (
	"errors"
	"fmt"

	"github.com/graphql-go/graphql/gqlerrors"
	"github.com/graphql-go/graphql/language/ast"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/auth/authhttp"
	"github.com/assistantcms/cms/pkg/content"
)

// Error codes, in extensions.code of every error.
const (
	CodeUnauthenticated    = "UNAUTHENTICATED"
	CodeForbidden          = "FORBIDDEN"
	CodeInsufficientScope  = "INSUFFICIENT_SCOPE"
	CodeBadAppID           = "BAD_APP_ID"
	CodeBadUserInput       = "BAD_USER_INPUT"
	CodeNotFound           = "NOT_FOUND"
	CodeAlreadyExists      = "ALREADY_EXISTS"
	CodeConflict           = "CONFLICT"
	CodeMissingReference   = "MISSING_REFERENCE"
	CodeParseFailed        = "GRAPHQL_PARSE_FAILED"
	CodeValidationFailed   = "GRAPHQL_VALIDATION_FAILED"
	CodeQueryTooDeep       = "QUERY_TOO_DEEP"
	CodeQueryTooComplex    = "QUERY_TOO_COMPLEX"
	CodeAnswerTooLarge     = "ANSWER_TOO_LARGE"
	CodeMutationNotAllowed = "MUTATION_NOT_ALLOWED"
	CodeBadRequest         = "BAD_REQUEST"
	CodeRequestTooLarge    = "REQUEST_TOO_LARGE"
	CodeRateLimited        = "RATE_LIMITED"
	CodeUnavailable        = "UNAVAILABLE"
	CodeInternal           = "INTERNAL"
)

// codedError is one GraphQL error with its code and the argument path at
// fault.
type codedError struct {
	code, field, msg string
	// scope is what an INSUFFICIENT_SCOPE error's token lacks.
	scope string
	// current is the record's revision a CONFLICT error found.
	current int64
}

func (e *codedError) Error() string { return e.msg }

func (e *codedError) Extensions() map[string]any {
	ext := map[string]any{"code": e.code}
	if e.field != "" {
		ext["field"] = e.field
	}
	if e.scope != "" {
		ext["scope"] = e.scope
	}
	if e.code == CodeConflict {
		ext["currentRevision"] = e.current
	}
	return ext
}

func errorf(code, field, format string, a ...any) *codedError {
	return &codedError{code: code, field: field, msg: fmt.Sprintf(format, a...)}
}

// problems is several errors from one resolver; the handler reports each
// as an error of its own.
type problems []*codedError

func (p problems) Error() string { return p[0].Error() }

func (p problems) Extensions() map[string]any { return p[0].Extensions() }

// fromProblems turns validation problems into errors under the argument.
func fromProblems(arg string, ps []content.Problem) error {
	out := make(problems, 0, len(ps))
	for _, p := range ps {
		field := arg
		switch {
		case arg == "":
			field = p.Path
		case p.Path != "":
			field = arg + "." + p.Path
		}
		out = append(out, errorf(CodeBadUserInput, field, "%s: %s", field, p.Message))
	}
	return out
}

// fromAuth maps an app resolution failure.
func fromAuth(err error) error { return fromRefusal(authhttp.Refuse(err)) }

// fromRefusal is a request refused for its token as a GraphQL error: the
// message and field every service answers with, under the code of its
// kind.
func fromRefusal(r authhttp.Refusal) *codedError {
	code := CodeUnavailable
	switch r.Kind {
	case auth.Unauthenticated:
		code = CodeUnauthenticated
	case auth.Forbidden:
		code = CodeForbidden
	case auth.ScopeMissing:
		code = CodeInsufficientScope
	case auth.Invalid:
		code = CodeBadAppID
	case auth.Throttled:
		code = CodeRateLimited
	}
	e := errorf(code, r.Field, "%s", r.Message)
	if r.Scope != 0 {
		e.scope = r.Scope.String()
	}
	return e
}

// expand replaces each error that stands for several problems by one
// error per problem, keeping its locations and path.
func expand(errs []gqlerrors.FormattedError) []gqlerrors.FormattedError {
	out := make([]gqlerrors.FormattedError, 0, len(errs))
	for _, fe := range errs {
		var ps problems
		var ge *gqlerrors.Error
		if errors.As(fe.OriginalError(), &ge) && errors.As(ge.OriginalError, &ps) && len(ps) > 1 {
			for _, p := range ps {
				e := fe
				e.Message, e.Extensions = p.Error(), p.Extensions()
				out = append(out, e)
			}
			continue
		}
		if fe.Extensions == nil {
			// Errors raised by graphql-go itself while executing.
			fe.Extensions = map[string]any{"code": CodeInternal}
		}
		out = append(out, fe)
	}
	return out
}

// variableErrors reports whether errs are graphql-go's errors about the
// request's variables, raised before anything runs, and gives each its
// code and the variable at fault.
func variableErrors(errs []gqlerrors.FormattedError) bool {
	names := make([]string, len(errs))
	for i, fe := range errs {
		var ge *gqlerrors.Error
		if !errors.As(fe.OriginalError(), &ge) || len(ge.Nodes) == 0 {
			return false
		}
		v, ok := ge.Nodes[0].(*ast.VariableDefinition)
		if !ok || v.Variable == nil || v.Variable.Name == nil {
			return false
		}
		names[i] = v.Variable.Name.Value
	}
	for i := range errs {
		errs[i].Extensions = errorf(CodeBadUserInput, "variables."+names[i], "").Extensions()
	}
	return len(errs) > 0
}
