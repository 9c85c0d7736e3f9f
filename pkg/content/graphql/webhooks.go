package graphql

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	gql "github.com/graphql-go/graphql"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/webhooks"
	"github.com/assistantcms/cms/pkg/edge/egress"
)

// WebhookStore keeps an app's endpoints and its delivery log.
type WebhookStore interface {
	CreateWebhook(ctx context.Context, w webhooks.Webhook) (webhooks.Webhook, error)
	Webhooks(ctx context.Context, app string) ([]webhooks.Webhook, error)
	UpdateWebhook(ctx context.Context, app, id string, change func(*webhooks.Webhook) error) (webhooks.Webhook, error)
	DeleteWebhook(ctx context.Context, app, id string) error
	RotateWebhookSecret(ctx context.Context, app, id string, overlap time.Duration) (webhooks.Webhook, error)
	Deliveries(ctx context.Context, f webhooks.DeliveryFilter) ([]webhooks.Delivery, error)
	Redeliver(ctx context.Context, app string, id int64) (webhooks.Delivery, error)
}

// webhookTypes are the types of the webhook fields.
type webhookTypes struct {
	webhook, created, delivery *gql.Object
	topic, state               *gql.Enum
}

func newWebhookTypes(jsonScalar *gql.Scalar) webhookTypes {
	topics := gql.EnumValueConfigMap{}
	for _, t := range webhooks.Topics() {
		topics[topicEnum(t)] = &gql.EnumValueConfig{Value: t}
	}
	topics[topicEnum(webhooks.TopicPublished)].Description = "An app that publishes has a new live version (a publish or a rollback)."
	topics[topicEnum(webhooks.TopicChanged)].Description = "The content of an app that does not publish changed; a burst of changes is one message."
	topics[topicEnum(webhooks.TopicGapsOpened)].Description = "The app's gap inbox has groups it did not have."
	topics[topicEnum(webhooks.TopicErrorRate)].Description = "The app's runtimes sent more ERROR events in a minute than errorRate."
	topic := gql.NewEnum(gql.EnumConfig{Name: "WebhookTopic", Description: "What a webhook is told of.", Values: topics})
	state := gql.NewEnum(gql.EnumConfig{Name: "DeliveryState", Values: gql.EnumValueConfigMap{
		"PENDING":   {Value: webhooks.Pending, Description: "To be sent, or tried again."},
		"DELIVERED": {Value: webhooks.Delivered, Description: "The endpoint answered 2xx."},
		"FAILED":    {Value: webhooks.Failed, Description: "Not delivered within a day of retries; redeliverWebhook sends it again."},
	}})
	str := nonNull(gql.String)
	webhook := gql.NewObject(gql.ObjectConfig{Name: "Webhook", Description: "An endpoint of the app. Its secret is answered only when made (createWebhook, rotateWebhookSecret).",
		Fields: metered(gql.Fields{
			"id":            field(nonNull(gql.ID), ""),
			"url":           field(str, ""),
			"topics":        field(listOf(topic), ""),
			"errorRate":     field(nonNull(gql.Int), "The ERROR events a minute from which ERRORS_RATE tells (0: any)."),
			"createdAt":     field(str, "RFC 3339, UTC."),
			"previousUntil": field(gql.String, "After a rotation, until when the previous secret signs too (RFC 3339, UTC)."),
		})})
	attempt := gql.NewObject(gql.ObjectConfig{Name: "DeliveryAttempt", Fields: metered(gql.Fields{
		"attempt":    field(nonNull(gql.Int), "Counts from 1."),
		"at":         field(str, "RFC 3339, UTC."),
		"status":     field(nonNull(gql.Int), "The HTTP status answered; 0 when none was."),
		"error":      field(str, "Why it failed, empty when it did not: the answer's first bytes, or the connection's error."),
		"durationMs": field(nonNull(gql.Int), ""),
	})})
	return webhookTypes{topic: topic, state: state, webhook: webhook,
		created: gql.NewObject(gql.ObjectConfig{Name: "WebhookSecret", Description: "An endpoint with its signing secret, answered once.",
			Fields: metered(gql.Fields{
				"webhook": field(nonNull(webhook), ""),
				"secret":  field(str, "whsec_ and base64: the key of the HMAC-SHA256 signatures (webhook-signature). Store it now: it cannot be shown again."),
			})}),
		delivery: gql.NewObject(gql.ObjectConfig{Name: "WebhookDelivery", Description: "A message to an endpoint and what became of it.",
			Fields: metered(gql.Fields{
				"id":          field(nonNull(gql.ID), "redeliverWebhook's deliveryId."),
				"messageId":   field(str, "Its webhook-id header: the same for every attempt."),
				"webhookId":   field(nonNull(gql.ID), ""),
				"topic":       field(nonNull(topic), ""),
				"payload":     field(nonNull(jsonScalar), "The body sent."),
				"createdAt":   field(str, "RFC 3339, UTC."),
				"state":       field(nonNull(state), ""),
				"nextAttempt": field(gql.String, "When a pending one is tried next (RFC 3339, UTC)."),
				"attempts":    field(listOf(attempt), "Oldest first."),
			})}),
	}
}

// topicEnum is a topic as WebhookTopic spells it: CONTENT_PUBLISHED.
func topicEnum(t string) string { return strings.ToUpper(strings.ReplaceAll(t, ".", "_")) }

func (r *resolvers) webhookQueries(t webhookTypes, args func(gql.FieldConfigArgument) gql.FieldConfigArgument) gql.Fields {
	return gql.Fields{
		"webhooks": {Type: listOf(t.webhook), Description: "The app's webhooks. Needs content:write.", Args: args(nil), Resolve: r.webhooks},
		"webhookDeliveries": {Type: listOf(t.delivery), Description: "The app's delivery log, newest first, each with its attempts. Needs content:write.",
			Args: args(gql.FieldConfigArgument{"webhookId": {Type: gql.ID}, "state": {Type: t.state},
				"before": {Type: gql.ID, Description: "The page after this delivery."},
				"first":  {Type: gql.Int, DefaultValue: 50, Description: "At most this many (up to 100)."}}),
			Resolve: r.webhookDeliveries},
	}
}

func (r *resolvers) webhookMutations(t webhookTypes, args func(gql.FieldConfigArgument) gql.FieldConfigArgument) gql.Fields {
	fields := gql.FieldConfigArgument{
		"url":       {Type: gql.String, Description: "https (or http) to a public address; loopback, private, link-local and metadata addresses are refused unless the operator allows them (WEBHOOK_ALLOW_NETS). Checked again at every delivery."},
		"topics":    {Type: gql.NewList(gql.NewNonNull(t.topic))},
		"errorRate": {Type: gql.Int, Description: "For ERRORS_RATE: the ERROR events a minute from which it tells."},
	}
	with := func(extra gql.FieldConfigArgument) gql.FieldConfigArgument {
		a := args(extra)
		for k, v := range fields {
			a[k] = v
		}
		return a
	}
	id := &gql.ArgumentConfig{Type: nonNull(gql.ID)}
	return gql.Fields{
		"createWebhook": {Type: nonNull(t.created), Description: "Registers an endpoint; its secret is answered this once. At most 10 an app.",
			Args: with(gql.FieldConfigArgument{"id": id}), Resolve: r.createWebhook},
		"updateWebhook": {Type: nonNull(t.webhook), Description: "Changes an endpoint's url, topics or errorRate; those left out stay.",
			Args: with(gql.FieldConfigArgument{"id": id}), Resolve: r.updateWebhook},
		"deleteWebhook": {Type: nonNull(gql.Boolean), Description: "Removes an endpoint and its delivery log.", Args: args(gql.FieldConfigArgument{"id": id}), Resolve: r.deleteWebhook},
		"rotateWebhookSecret": {Type: nonNull(t.created), Description: "Gives an endpoint a new secret; the previous one signs too for overlapSeconds (at most a week), so that both are accepted while the receiver changes.",
			Args: args(gql.FieldConfigArgument{"id": id, "overlapSeconds": {Type: gql.Int, DefaultValue: 86400}}), Resolve: r.rotateWebhookSecret},
		"redeliverWebhook": {Type: nonNull(t.delivery), Description: "Sends a delivery again, whatever became of it, with the same message ID; retried as a new one is.",
			Args: args(gql.FieldConfigArgument{"deliveryId": id}), Resolve: r.redeliverWebhook},
	}
}

func webhookView(w webhooks.Webhook) map[string]any {
	topics := make([]any, len(w.Topics))
	for i, t := range w.Topics {
		topics[i] = t
	}
	out := map[string]any{"id": w.ID, "url": w.URL, "topics": topics, "errorRate": w.ErrorRate,
		"createdAt": w.CreatedAt.UTC().Format(content.TimeLayout), "previousUntil": nil}
	if !w.PreviousUntil.IsZero() {
		out["previousUntil"] = w.PreviousUntil.UTC().Format(content.TimeLayout)
	}
	return out
}

func deliveryView(d webhooks.Delivery) map[string]any {
	attempts := make([]any, len(d.Log))
	for i, a := range d.Log {
		attempts[i] = map[string]any{"attempt": a.N, "at": a.At.UTC().Format(content.TimeLayout), "status": a.Status, "error": a.Error,
			"durationMs": int(a.Duration.Milliseconds())}
	}
	out := map[string]any{"id": strconv.FormatInt(d.ID, 10), "messageId": d.MessageID(), "webhookId": d.WebhookID, "topic": d.Topic,
		"payload": jsonDoc(d.Payload), "createdAt": d.CreatedAt.UTC().Format(content.TimeLayout), "state": d.State, "nextAttempt": nil, "attempts": attempts}
	if d.State == webhooks.Pending {
		out["nextAttempt"] = d.NextAttempt.UTC().Format(content.TimeLayout)
	}
	return out
}

// webhookError answers the store's refusals of a webhook operation.
func webhookError(err error, app, id string) error {
	switch {
	case errors.Is(err, content.ErrNotFound):
		return errorf(CodeNotFound, "id", "app %q has no webhook or delivery %q", app, id)
	case errors.Is(err, content.ErrConflict):
		return errorf(CodeAlreadyExists, "id", "app %q has a webhook %q already", app, id)
	case errors.Is(err, webhooks.ErrTooManyWebhooks):
		return errorf(CodeBadUserInput, "id", "%v", err)
	}
	return storeError(err)
}

func (r *resolvers) webhooks(p gql.ResolveParams) (any, error) {
	t, err := r.authorTarget(p, true, "webhooks")
	if err != nil {
		return nil, err
	}
	ws, err := r.store.Webhooks(p.Context, t.AppID)
	if err != nil {
		return nil, storeError(err)
	}
	return objects(p, ws, webhookView)
}

func (r *resolvers) webhookDeliveries(p gql.ResolveParams) (any, error) {
	t, err := r.authorTarget(p, true, "webhooks")
	if err != nil {
		return nil, err
	}
	f := webhooks.DeliveryFilter{App: t.AppID}
	f.Webhook, _ = p.Args["webhookId"].(string)
	f.State, _ = p.Args["state"].(string)
	if f.Limit, _ = p.Args["first"].(int); f.Limit < 1 || f.Limit > webhooks.MaxDeliveriesPage {
		return nil, errorf(CodeBadUserInput, "first", "first must be from 1 to %d, got %d", webhooks.MaxDeliveriesPage, f.Limit)
	}
	if s, ok := p.Args["before"].(string); ok {
		if f.Before, err = strconv.ParseInt(s, 10, 64); err != nil || f.Before < 1 {
			return nil, errorf(CodeBadUserInput, "before", "before must be a delivery's id")
		}
	}
	ds, err := r.store.Deliveries(p.Context, f)
	if err != nil {
		return nil, storeError(err)
	}
	var held int64
	for _, d := range ds {
		held += int64(len(d.Payload))
	}
	if err := executionOf(p.Context).charge(p, 0, held); err != nil {
		return nil, err
	}
	return objects(p, ds, deliveryView)
}

// checkURL checks the destination of the url argument, if any: before
// any transaction, as it asks DNS.
func (r *resolvers) checkURL(ctx context.Context, p gql.ResolveParams) error {
	if u, ok := p.Args["url"].(string); ok {
		if _, err := egress.CheckURL(ctx, u, r.webhookAllow); err != nil {
			return errorf(CodeBadUserInput, "url", "url: %v", err)
		}
	}
	return nil
}

// webhookFields applies the url (checked), topics and errorRate
// arguments to w.
func webhookFields(p gql.ResolveParams, w *webhooks.Webhook) error {
	if u, ok := p.Args["url"].(string); ok {
		w.URL = u
	}
	if list, ok := p.Args["topics"].([]any); ok {
		w.Topics = w.Topics[:0]
		for _, t := range list {
			w.Topics = append(w.Topics, t.(string))
		}
	}
	if n, ok := p.Args["errorRate"].(int); ok {
		w.ErrorRate = n
	}
	var ps problems
	for _, err := range w.Check() {
		field, msg, _ := strings.Cut(err.Error(), ": ")
		ps = append(ps, errorf(CodeBadUserInput, field, "%s: %s", field, msg))
	}
	if len(ps) > 0 {
		return ps
	}
	return nil
}

func (r *resolvers) createWebhook(p gql.ResolveParams) (any, error) {
	t, err := r.authorTarget(p, false, "webhooks")
	if err != nil {
		return nil, err
	}
	id, _ := p.Args["id"].(string)
	w := webhooks.Webhook{AppID: t.AppID, ID: id}
	if _, ok := p.Args["url"].(string); !ok {
		return nil, errorf(CodeBadUserInput, "url", "url is required")
	}
	if err := r.checkURL(p.Context, p); err != nil {
		return nil, err
	}
	if err := webhookFields(p, &w); err != nil {
		return nil, err
	}
	w, err = r.store.CreateWebhook(auditedAs(p), w)
	if err != nil {
		return nil, webhookError(err, t.AppID, id)
	}
	executionOf(p.Context).wrote(p)
	return map[string]any{"webhook": webhookView(w), "secret": w.Secret}, nil
}

func (r *resolvers) updateWebhook(p gql.ResolveParams) (any, error) {
	t, err := r.authorTarget(p, false, "webhooks")
	if err != nil {
		return nil, err
	}
	id, _ := p.Args["id"].(string)
	if err := r.checkURL(p.Context, p); err != nil {
		return nil, err
	}
	w, err := r.store.UpdateWebhook(auditedAs(p), t.AppID, id, func(w *webhooks.Webhook) error { return webhookFields(p, w) })
	var ps problems
	var ce *codedError
	switch {
	case errors.As(err, &ps), errors.As(err, &ce):
		return nil, storeError(err)
	case err != nil:
		return nil, webhookError(err, t.AppID, id)
	}
	executionOf(p.Context).wrote(p)
	return webhookView(w), nil
}

func (r *resolvers) deleteWebhook(p gql.ResolveParams) (any, error) {
	t, err := r.authorTarget(p, false, "webhooks")
	if err != nil {
		return nil, err
	}
	id, _ := p.Args["id"].(string)
	if err := r.store.DeleteWebhook(auditedAs(p), t.AppID, id); err != nil {
		return nil, webhookError(err, t.AppID, id)
	}
	executionOf(p.Context).wrote(p)
	return true, nil
}

func (r *resolvers) rotateWebhookSecret(p gql.ResolveParams) (any, error) {
	t, err := r.authorTarget(p, false, "webhooks")
	if err != nil {
		return nil, err
	}
	id, _ := p.Args["id"].(string)
	secs, _ := p.Args["overlapSeconds"].(int)
	if secs < 0 || time.Duration(secs)*time.Second > webhooks.MaxRotateAfter {
		return nil, errorf(CodeBadUserInput, "overlapSeconds", "overlapSeconds must be from 0 to %d", int(webhooks.MaxRotateAfter/time.Second))
	}
	w, err := r.store.RotateWebhookSecret(auditedAs(p), t.AppID, id, time.Duration(secs)*time.Second)
	if err != nil {
		return nil, webhookError(err, t.AppID, id)
	}
	executionOf(p.Context).wrote(p)
	return map[string]any{"webhook": webhookView(w), "secret": w.Secret}, nil
}

func (r *resolvers) redeliverWebhook(p gql.ResolveParams) (any, error) {
	t, err := r.authorTarget(p, false, "webhooks")
	if err != nil {
		return nil, err
	}
	raw, _ := p.Args["deliveryId"].(string)
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 1 {
		return nil, errorf(CodeBadUserInput, "deliveryId", "deliveryId must be a delivery's id")
	}
	d, err := r.store.Redeliver(auditedAs(p), t.AppID, id)
	if err != nil {
		return nil, webhookError(err, t.AppID, raw)
	}
	r.delivered()
	executionOf(p.Context).wrote(p)
	return deliveryView(d), nil
}
