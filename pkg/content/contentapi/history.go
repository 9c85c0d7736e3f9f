package contentapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content"
)

// historyPage is how many revisions or entries a read answers unless the
// limit parameter says otherwise (up to content.MaxHistoryPage).
const historyPage = 50

type revisionJSON struct {
	Kind      content.Kind    `json:"kind"`
	ID        string          `json:"id"`
	Revision  int64           `json:"revision"`
	Deleted   bool            `json:"deleted"`
	ChangedAt string          `json:"changedAt"`
	AuditID   string          `json:"auditId"`
	Document  json.RawMessage `json:"document"`
}

type entryJSON struct {
	ID            string `json:"id"`
	At            string `json:"at"`
	Operation     string `json:"operation"`
	Subject       string `json:"subject"`
	TokenID       string `json:"tokenId"`
	TokenName     string `json:"tokenName"`
	LocalUser     string `json:"localUser"`
	ClientNetwork string `json:"clientNetwork"`
	UserAgent     string `json:"userAgent"`
	RequestID     string `json:"requestId"`
	Created       int    `json:"created"`
	Updated       int    `json:"updated"`
	Deleted       int    `json:"deleted"`
	Unchanged     int    `json:"unchanged"`
}

type changeJSON struct {
	Path   string          `json:"path"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// historyKey reads the kind and id path parameters; on failure it has
// answered.
func historyKey(c *gin.Context) (content.Kind, string, bool) {
	kind, id := content.Kind(c.Param("kind")), c.Param("id")
	if kind != content.KindApp && !slices.Contains(content.Kinds(), kind) {
		abort(c, http.StatusBadRequest, "kind", "kind must be one of intent, handler, entity, faq, document or app.")
		return "", "", false
	}
	if !auth.PossibleID(id) {
		abort(c, http.StatusNotFound, "id", "No such record.")
		return "", "", false
	}
	return kind, id, true
}

// numberParam reads a revision or an audit entry's ID; zero when absent
// and not required. On failure it has answered.
func numberParam(c *gin.Context, name string, required bool) (int64, bool) {
	v, ok := c.GetQuery(name)
	if !ok && !required {
		return 0, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		abort(c, http.StatusBadRequest, name, name+" must be a revision: a whole number.")
		return 0, false
	}
	return n, true
}

// page reads the before and limit parameters of a paged read; on
// failure it has answered.
func page(c *gin.Context) (before int64, limit int, ok bool) {
	if before, ok = numberParam(c, "before", false); !ok {
		return 0, 0, false
	}
	limit, ok = intParam(c, "limit", historyPage, content.MaxHistoryPage)
	return before, limit, ok
}

// revisions serves a record's revisions, newest first:
// {"revisions": [...]}.
func (a *API) revisions(c *gin.Context) {
	kind, id, ok := historyKey(c)
	if !ok {
		return
	}
	before, limit, ok := page(c)
	if !ok {
		return
	}
	revs, err := a.store.Revisions(c.Request.Context(), target(c).AppID, kind, id, before, limit)
	if err != nil {
		a.serverError(c, "read revisions", err)
		return
	}
	out := make([]revisionJSON, len(revs))
	for i, r := range revs {
		out[i] = revisionJSON{Kind: r.Kind, ID: r.ID, Revision: r.Revision, Deleted: r.Deleted, ChangedAt: r.ChangedAt.UTC().Format(content.TimeLayout),
			AuditID: strconv.FormatInt(r.AuditID, 10), Document: r.Doc}
	}
	c.JSON(http.StatusOK, gin.H{"revisions": out})
}

// revisionDiff serves the fields that differ from one revision of a
// record to another: {"changes": [...]}.
func (a *API) revisionDiff(c *gin.Context) {
	kind, id, ok := historyKey(c)
	if !ok {
		return
	}
	from, ok := numberParam(c, "from", true)
	if !ok {
		return
	}
	to, ok := numberParam(c, "to", true)
	if !ok {
		return
	}
	changes, err := content.DiffRevisions(c.Request.Context(), a.store, target(c).AppID, kind, id, from, to)
	var none *content.NoSuchRevision
	switch {
	case errors.As(err, &none):
		abort(c, http.StatusNotFound, map[bool]string{false: "from", true: "to"}[none.Second], "The record has no such revision.")
		return
	case err != nil:
		a.serverError(c, "compare revisions", err)
		return
	}
	out := make([]changeJSON, len(changes))
	for i, ch := range changes {
		out[i] = changeJSON{Path: ch.Path, Before: ch.Before, After: ch.After}
	}
	c.JSON(http.StatusOK, gin.H{"changes": out})
}

// auditLog serves the app's audit log, newest first: {"entries": [...]}.
func (a *API) auditLog(c *gin.Context) {
	f := content.AuditFilter{AppID: target(c).AppID, TokenID: c.Query("tokenId"), LocalUser: c.Query("localUser"),
		Operation: c.Query("operation"), Kind: content.Kind(c.Query("kind")), ID: c.Query("id")}
	for _, tm := range []struct {
		name string
		to   *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v, ok := c.GetQuery(tm.name); ok {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				abort(c, http.StatusBadRequest, tm.name, tm.name+" must be an RFC 3339 time, such as 2026-12-06T09:30:00Z.")
				return
			}
			*tm.to = t
		}
	}
	if (f.Kind == "") != (f.ID == "") {
		abort(c, http.StatusBadRequest, "id", "kind and id name a record together.")
		return
	}
	before, limit, ok := page(c)
	if !ok {
		return
	}
	f.Before, f.Limit = before, limit
	entries, err := a.store.AuditLog(c.Request.Context(), f)
	if err != nil && !errors.Is(err, content.ErrNotFound) {
		a.serverError(c, "read the audit log", err)
		return
	}
	out := make([]entryJSON, len(entries))
	for i, e := range entries {
		out[i] = entryJSON{ID: strconv.FormatInt(e.ID, 10), At: e.At.UTC().Format(content.TimeLayout), Operation: e.Operation, Subject: e.Subject,
			TokenID: e.Actor.TokenID, TokenName: e.Actor.TokenName, LocalUser: e.Actor.LocalUser, ClientNetwork: e.Actor.ClientNet,
			UserAgent: e.Actor.UserAgent, RequestID: e.Actor.RequestID,
			Created: e.Created, Updated: e.Updated, Deleted: e.Deleted, Unchanged: e.Unchanged}
	}
	c.JSON(http.StatusOK, gin.H{"entries": out})
}
