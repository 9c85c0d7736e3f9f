package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	kafkago "github.com/segmentio/kafka-go"
)

// DurabilityRisk is a setting of an existing topic under which a write
// acknowledged by all in-sync replicas (acks=all, as ingest and the
// dead-letter writer ask) can still be lost, or can never succeed.
type DurabilityRisk struct {
	Topic string
	// Setting is the topic setting at fault and Value what it is.
	Setting, Value string
	// Reason names the risk on the metric's reason label.
	Reason string
	// Why says what can happen, for the log.
	Why string
}

// The reasons of durability risks, as the metric labels them.
const (
	RiskReplicationBelowConfigured = "replication_below_configured"
	RiskMinInsyncAboveReplication  = "min_insync_above_replication"
	RiskMinInsyncOne               = "min_insync_replicas_one"
	RiskUncleanLeaderElection      = "unclean_leader_election"
)

// durabilityRisks judges one topic: replication is its fewest replicas of
// any partition, configs its settings as the brokers apply them.
func durabilityRisks(spec TopicSpec, replication int, configs map[string]string) []DurabilityRisk {
	var risks []DurabilityRisk
	add := func(setting, value, reason, why string) {
		risks = append(risks, DurabilityRisk{Topic: spec.Name, Setting: setting, Value: value, Reason: reason, Why: why})
	}
	if spec.ReplicationFactor > replication {
		add(replicationFactorLabel, strconv.Itoa(replication), RiskReplicationBelowConfigured,
			fmt.Sprintf("the topic has %d replicas where %d are configured (TOPIC_REPLICATION): losing a broker loses more than intended", replication, spec.ReplicationFactor))
	}
	if v, ok := configs[minInsyncReplicas]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		switch {
		case err != nil:
			// Not a number: nothing to judge; the brokers refuse such a value.
		case n > replication:
			add(minInsyncReplicas, v, RiskMinInsyncAboveReplication,
				fmt.Sprintf("more in-sync replicas are required than the topic's %d replicas: every acks=all write is refused (NOT_ENOUGH_REPLICAS)", replication))
		case n <= 1 && replication >= 3:
			add(minInsyncReplicas, v, RiskMinInsyncOne,
				fmt.Sprintf("with %d replicas, acks=all is satisfied by the leader alone: a write it acknowledged is lost if that broker fails before the others copy it", replication))
		}
	}
	if v := configs[uncleanLeaderElection]; strings.EqualFold(strings.TrimSpace(v), "true") {
		add(uncleanLeaderElection, v, RiskUncleanLeaderElection,
			"a replica that is not in sync may become leader and drop writes that were acknowledged")
	}
	return risks
}

// DurabilityRisks reads the replication and settings of the topics of
// specs and returns what undermines acks=all on them. Topics that do not
// exist are skipped.
func (c Cluster) DurabilityRisks(ctx context.Context, specs []TopicSpec) ([]DurabilityRisk, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	cl, done, err := c.admin()
	if err != nil {
		return nil, err
	}
	defer done()
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	md, err := cl.Metadata(ctx, &kafkago.MetadataRequest{Topics: names})
	if err != nil {
		return nil, fmt.Errorf("read the replication of topics %v: %w", names, c.explain(ctx, err))
	}
	replication := map[string]int{}
	for _, t := range md.Topics {
		if t.Error != nil || len(t.Partitions) == 0 {
			continue
		}
		fewest := len(t.Partitions[0].Replicas)
		for _, p := range t.Partitions[1:] {
			fewest = min(fewest, len(p.Replicas))
		}
		replication[t.Name] = fewest
	}
	req := &kafkago.DescribeConfigsRequest{}
	for _, s := range specs {
		if _, ok := replication[s.Name]; ok {
			req.Resources = append(req.Resources, kafkago.DescribeConfigRequestResource{
				ResourceType: kafkago.ResourceTypeTopic, ResourceName: s.Name,
				ConfigNames: []string{minInsyncReplicas, uncleanLeaderElection},
			})
		}
	}
	if len(req.Resources) == 0 {
		return nil, nil
	}
	resp, err := cl.DescribeConfigs(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("describe the configuration of topics %v: %w", names, c.explain(ctx, err))
	}
	configs := map[string]map[string]string{}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return nil, fmt.Errorf("describe the configuration of topic %q: %w", r.ResourceName, c.explain(ctx, r.Error))
		}
		m := map[string]string{}
		for _, e := range r.ConfigEntries {
			m[e.ConfigName] = e.ConfigValue
		}
		configs[r.ResourceName] = m
	}
	var risks []DurabilityRisk
	for _, s := range specs {
		if n, ok := replication[s.Name]; ok {
			risks = append(risks, durabilityRisks(s, n, configs[s.Name])...)
		}
	}
	return risks, nil
}

// DurabilityGauge is the metric cms_kafka_topic_durability_risk: 1 for
// each topic and reason at risk when last checked.
type DurabilityGauge struct {
	g *prometheus.GaugeVec
}

// NewDurabilityGauge registers the gauge on reg.
func NewDurabilityGauge(reg prometheus.Registerer) *DurabilityGauge {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cms_kafka_topic_durability_risk",
		Help: "1 while a topic's settings undermine acks=all, by topic and reason (" +
			strings.Join([]string{RiskReplicationBelowConfigured, RiskMinInsyncAboveReplication, RiskMinInsyncOne, RiskUncleanLeaderElection}, ", ") +
			"), as found at start.",
	}, []string{"topic", "reason"})
	reg.MustRegister(g)
	return &DurabilityGauge{g: g}
}

// ReportDurability checks the topics of specs, warns in log of each risk
// (topic, setting, value and why) and sets gauge to the risks found. A
// check that fails is warned of too: it must not keep the service from
// starting, since the topics' settings are the cluster operators' to fix.
func (c Cluster) ReportDurability(ctx context.Context, specs []TopicSpec, gauge *DurabilityGauge, log *slog.Logger) []DurabilityRisk {
	risks, err := c.DurabilityRisks(ctx, specs)
	if err != nil {
		log.Warn("could not check the topics' durability settings", "err", err)
		return nil
	}
	gauge.g.Reset()
	for _, r := range risks {
		log.Warn("Kafka topic setting undermines durability: "+r.Why,
			"topic", r.Topic, "setting", r.Setting, "value", r.Value, "reason", r.Reason)
		gauge.g.WithLabelValues(r.Topic, r.Reason).Set(1)
	}
	return risks
}
