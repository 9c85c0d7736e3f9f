package k8s_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// recorder collects what a check reports instead of failing the test.
type recorder struct{ errs []string }

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// mustRun returns the workload and container running cmd.
func mustRun(t *testing.T, cl *cluster, cmd string) (*workload, *container) {
	t.Helper()
	w, c := cl.running(cmd)
	if w == nil {
		t.Fatalf("nothing runs %s", cmd)
	}
	return w, c
}

// configMapWith returns the ConfigMap holding key.
func configMapWith(t *testing.T, cl *cluster, key string) configMap {
	t.Helper()
	for _, cm := range cl.configMaps {
		if _, ok := cm.Data[key]; ok {
			return cm
		}
	}
	t.Fatalf("no ConfigMap holds %s", key)
	return configMap{}
}

// byName returns the object called name among items.
func byName[E any, P interface {
	*E
	objectName() string
}](t *testing.T, items []E, name string) P {
	t.Helper()
	for i := range items {
		if p := P(&items[i]); p.objectName() == name {
			return p
		}
	}
	t.Fatalf("no object named %s", name)
	return nil
}

func (h *header) objectName() string { return h.Metadata.Name }

// TestChecksCatchMistakes breaks the built manifests one way at a time and
// expects the matching check to say so, having first passed them intact:
// a check that cannot fail would make TestManifests worthless.
func TestChecksCatchMistakes(t *testing.T) {
	cases := []struct {
		name string
		// base runs the case on the base instead of the production overlay.
		base bool
		// editFile, when set, changes the sources before the build.
		editFile func(path string, b []byte) []byte
		// edit changes the decoded build.
		edit  func(t *testing.T, cl *cluster)
		check func(reporter, *cluster)
		want  string
	}{
		{
			name: "readiness probe on /healthz",
			edit: func(t *testing.T, cl *cluster) {
				_, c := mustRun(t, cl, ingestBin)
				c.ReadinessProbe.HTTPGet.Path = "/healthz"
			},
			check: checkWorkloads, want: `readinessProbe path "/healthz"`,
		},
		{
			name: "liveness probe on a port the container lacks",
			edit: func(t *testing.T, cl *cluster) {
				_, c := mustRun(t, cl, apiBin)
				c.LivenessProbe.HTTPGet.Port = intOrString{str: "metrics"}
			},
			check: checkWorkloads, want: "livenessProbe port metrics is not a port",
		},
		{
			name:  "no readiness probe",
			edit:  func(t *testing.T, cl *cluster) { _, c := mustRun(t, cl, consumerBin); c.ReadinessProbe = nil },
			check: checkWorkloads, want: "no readinessProbe",
		},
		{
			name: "preStop hook that needs a shell",
			edit: func(t *testing.T, cl *cluster) {
				_, c := mustRun(t, cl, apiBin)
				c.Lifecycle.PreStop.Exec = &yaml.Node{Kind: yaml.MappingNode}
			},
			check: checkWorkloads, want: "preStop exec cannot run in the distroless image",
		},
		{
			name:  "no CPU limit",
			edit:  func(t *testing.T, cl *cluster) { _, c := mustRun(t, cl, apiBin); delete(c.Resources.Limits, "cpu") },
			check: checkWorkloads, want: "cpu needs requests and limits",
		},
		{
			name: "memory request above the limit",
			edit: func(t *testing.T, cl *cluster) {
				_, c := mustRun(t, cl, consumerBin)
				c.Resources.Requests["memory"] = "4Gi"
			},
			check: checkWorkloads, want: "memory request 4Gi exceeds the limit",
		},
		{
			name: "root user",
			edit: func(t *testing.T, cl *cluster) {
				w, _ := mustRun(t, cl, ingestBin)
				w.Spec.Template.Spec.SecurityContext.RunAsUser = ptr(int64(0))
			},
			check: checkWorkloads, want: "runAsUser must be 65532",
		},
		{
			name: "writable root filesystem",
			edit: func(t *testing.T, cl *cluster) {
				_, c := mustRun(t, cl, ingestBin)
				c.SecurityContext.ReadOnlyRootFilesystem = ptr(false)
			},
			check: checkWorkloads, want: "readOnlyRootFilesystem must be true",
		},
		{
			name: "capability added",
			edit: func(t *testing.T, cl *cluster) {
				_, c := mustRun(t, cl, apiBin)
				c.SecurityContext.Capabilities.Add = []string{"NET_BIND_SERVICE"}
			},
			check: checkWorkloads, want: "capabilities must drop ALL and add none",
		},
		{
			name: "pods not spread",
			edit: func(t *testing.T, cl *cluster) {
				w, _ := mustRun(t, cl, apiBin)
				w.Spec.Template.Spec.TopologySpreadConstraints = nil
			},
			check: checkWorkloads, want: "spreads its pods",
		},
		{
			name:  "image tag not the overlay's",
			edit:  func(t *testing.T, cl *cluster) { _, c := mustRun(t, cl, consumerBin); c.Image = image + ":latest" },
			check: checkImages, want: `image "ghcr.io/assistantcms/cms:latest"`,
		},
		{
			name:  "overlay without a pinned image",
			edit:  func(t *testing.T, cl *cluster) { cl.pinned, cl.wantImage = false, image },
			check: checkImages, want: "must pin",
		},
		{
			name: "misspelt variable in an env file",
			editFile: func(path string, b []byte) []byte {
				if path != "base/config/kafka.env" {
					return b
				}
				return bytes.Replace(b, []byte("KAFKA_BROKERS="), []byte("KAFKA_BROKER="), 1)
			},
			check: checkEnv, want: "KAFKA_BROKER (from ConfigMap cms-kafka-",
		},
		{
			name: "another binary's variable",
			edit: func(t *testing.T, cl *cluster) {
				configMapWith(t, cl, "CONSUMER_GROUP").Data["MAX_EVENT_BYTES"] = "1048576"
			},
			check: checkEnv, want: "MAX_EVENT_BYTES (from ConfigMap cms-consumer-",
		},
		{
			name: "a variable's deprecated former name",
			edit: func(t *testing.T, cl *cluster) {
				_, c := mustRun(t, cl, ingestBin)
				c.Env = append(c.Env, envVar{Name: "READ_TIMEOUT", Value: ptr("30s")})
			},
			check: checkEnv, want: "READ_TIMEOUT (from a literal value) is the deprecated former name of HTTP_READ_TIMEOUT",
		},
		{
			name: "CORS origins for the consumer, which browsers never call",
			edit: func(t *testing.T, cl *cluster) {
				configMapWith(t, cl, "CONSUMER_GROUP").Data["CORS_ALLOWED_ORIGINS"] = "https://app.example.com"
			},
			check: checkEnv, want: "CORS_ALLOWED_ORIGINS (from ConfigMap cms-consumer-",
		},
		{
			name: "variable set twice",
			edit: func(t *testing.T, cl *cluster) {
				_, c := mustRun(t, cl, ingestBin)
				c.Env = append(c.Env, envVar{Name: "KAFKA_BROKERS", Value: ptr("kafka:9092")})
			},
			check: checkEnv, want: "KAFKA_BROKERS is set twice",
		},
		{
			name: "content database as a literal",
			edit: func(t *testing.T, cl *cluster) {
				_, c := mustRun(t, cl, ingestBin)
				for i := range c.Env {
					if c.Env[i].Name == "CONTENT_DB" {
						c.Env[i] = envVar{Name: "CONTENT_DB", Value: ptr("/data/cms.db")}
					}
				}
			},
			check: checkEnv, want: "CONTENT_DB comes from a literal value",
		},
		{
			name: "password in a ConfigMap",
			edit: func(t *testing.T, cl *cluster) {
				configMapWith(t, cl, "CLICKHOUSE_USER").Data["CLICKHOUSE_PASSWORD"] = "x"
			},
			check: checkConfigSecrets, want: "holds CLICKHOUSE_PASSWORD, a secret",
		},
		{
			name: "secret value copied into a ConfigMap",
			edit: func(t *testing.T, cl *cluster) {
				for _, values := range cl.secrets {
					if pw := values["CLICKHOUSE_PASSWORD"]; pw != "" {
						configMapWith(t, cl, "CLICKHOUSE_ADDR").Data["CLICKHOUSE_ADDR"] = "clickhouse:9000?password=" + pw
					}
				}
			},
			check: checkConfigSecrets, want: "key CLICKHOUSE_ADDR holds the value of Secret",
		},
		{
			name: "secretKeyRef to a missing key",
			edit: func(t *testing.T, cl *cluster) {
				_, c := mustRun(t, cl, ingestBin)
				for i := range c.Env {
					if c.Env[i].ValueFrom != nil && c.Env[i].ValueFrom.SecretKeyRef != nil {
						c.Env[i].ValueFrom.SecretKeyRef.Key = "CONTENT_DSN"
					}
				}
			},
			check: checkConfigSecrets, want: "key CONTENT_DSN, which the build lacks",
		},
		{
			name:  "a Secret in the base",
			base:  true,
			edit:  func(t *testing.T, cl *cluster) { cl.secrets["cms-secrets"] = map[string]string{"CONTENT_DB": "x"} },
			check: checkConfigSecrets, want: "the base holds Secrets",
		},
		{
			name:  "listen address off the container port",
			edit:  func(t *testing.T, cl *cluster) { configMapWith(t, cl, "INGEST_ADDR").Data["INGEST_ADDR"] = ":9090" },
			check: checkListenPort, want: "listens on 9090 (INGEST_ADDR) but its port named http is 8081",
		},
		{
			name: "grace period within the drain",
			edit: func(t *testing.T, cl *cluster) {
				w, _ := mustRun(t, cl, ingestBin)
				w.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr(int64(15))
			},
			check: checkShutdown, want: "terminationGracePeriodSeconds 15 must exceed the preStop sleep 5s plus SHUTDOWN_TIMEOUT 10s",
		},
		{
			name:  "consumers beyond the partitions",
			edit:  func(t *testing.T, cl *cluster) { w, _ := mustRun(t, cl, consumerBin); w.Spec.Replicas = ptr(7) },
			check: checkConsumerGroup, want: "replicas 7; want 1 to TOPIC_PARTITIONS (6)",
		},
		{
			name: "consumer on another topic",
			edit: func(t *testing.T, cl *cluster) {
				_, c := mustRun(t, cl, consumerBin)
				kafka := configMapWith(t, cl, "EVENTS_TOPIC")
				data := map[string]string{}
				for k, v := range kafka.Data {
					data[k] = v
				}
				data["EVENTS_TOPIC"] = "other.events"
				cl.configMaps["other-kafka"] = configMap{header: header{Metadata: meta{Name: "other-kafka"}}, Data: data}
				for i := range c.EnvFrom {
					if c.EnvFrom[i].ConfigMapRef != nil && c.EnvFrom[i].ConfigMapRef.Name == kafka.Metadata.Name {
						c.EnvFrom[i].ConfigMapRef.Name = "other-kafka"
					}
				}
			},
			check: checkConsumerGroup, want: "disagree on EVENTS_TOPIC",
		},
		{
			name: "api without the brokers",
			edit: func(t *testing.T, cl *cluster) {
				_, c := mustRun(t, cl, apiBin)
				kafka := configMapWith(t, cl, "KAFKA_BROKERS")
				kept := c.EnvFrom[:0]
				for _, e := range c.EnvFrom {
					if e.ConfigMapRef == nil || e.ConfigMapRef.Name != kafka.Metadata.Name {
						kept = append(kept, e)
					}
				}
				c.EnvFrom = kept
			},
			check: checkLiveView, want: "the api's live view and ingest disagree on KAFKA_BROKERS",
		},
		{
			name:  "autoscaler minimum of one",
			edit:  func(t *testing.T, cl *cluster) { byName(t, cl.hpas, "cms-ingest").Spec.MinReplicas = ptr(1) },
			check: checkAutoscaling, want: "minReplicas 1; want at least 2",
		},
		{
			name: "consumer autoscaled",
			edit: func(t *testing.T, cl *cluster) {
				w, _ := mustRun(t, cl, consumerBin)
				w.Spec.Replicas = nil
				byName(t, cl.hpas, "cms-ingest").Spec.ScaleTargetRef.Name = w.Metadata.Name
			},
			check: checkAutoscaling, want: "(the consumer) is autoscaled",
		},
		{
			name: "autoscaler target missing",
			edit: func(t *testing.T, cl *cluster) {
				byName(t, cl.hpas, "cms-api").Spec.ScaleTargetRef.Name = "cms-nothing"
			},
			check: checkAutoscaling, want: "Deployment/cms-nothing is not in the build",
		},
		{
			name:  "replicas under an autoscaler",
			edit:  func(t *testing.T, cl *cluster) { w, _ := mustRun(t, cl, apiBin); w.Spec.Replicas = ptr(3) },
			check: checkAutoscaling, want: "sets replicas",
		},
		{
			name: "disruption budget picks no pods",
			edit: func(t *testing.T, cl *cluster) {
				byName(t, cl.pdbs, "cms-ingest").Spec.Selector.MatchLabels = map[string]string{"app.kubernetes.io/component": "ingestt"}
			},
			check: checkDisruptionBudgets, want: "picks the pods of 0 workloads",
		},
		{
			name: "disruption budget blocking drains",
			edit: func(t *testing.T, cl *cluster) {
				p := byName(t, cl.pdbs, "cms-consumer")
				p.Spec.MaxUnavailable, p.Spec.MinAvailable = nil, &intOrString{num: 3}
			},
			check: checkDisruptionBudgets, want: "minAvailable 3 with at least 3 replicas blocks drains",
		},
		{
			name: "Service to a port the pods lack",
			edit: func(t *testing.T, cl *cluster) {
				byName(t, cl.services, "cms-ingest").Spec.Ports[0].TargetPort = intOrString{str: "metrics"}
			},
			check: checkServices, want: "targets metrics, which",
		},
		{
			name: "Service selecting nothing",
			edit: func(t *testing.T, cl *cluster) {
				byName(t, cl.services, "cms-api").Spec.Selector["app.kubernetes.io/component"] = "apii"
			},
			check: checkServices, want: "picks the pods of 0 workloads",
		},
		{
			name:  "ServiceMonitor on a port name the Service lacks",
			edit:  func(t *testing.T, cl *cluster) { byName(t, cl.monitors, "cms-consumer").Spec.Endpoints[0].Port = "web" },
			check: checkServiceMonitors, want: `has no port named "web"`,
		},
		{
			name: "ServiceMonitor on the client port",
			edit: func(t *testing.T, cl *cluster) {
				byName(t, cl.monitors, "cms-ingest").Spec.Endpoints[0].Port = "http"
			},
			check: checkServiceMonitors, want: `scrapes port "http"; /metrics answers on "operator" only`,
		},
		{
			name: "operator address not the operator port",
			edit: func(t *testing.T, cl *cluster) {
				_, c := cl.running(apiBin)
				for i := range c.Ports {
					if c.Ports[i].Name == "operator" {
						c.Ports[i].ContainerPort = 9999
					}
				}
			},
			check: checkListenPort, want: "(OPERATOR_ADDR) but its port named operator is 9999",
		},
		{
			name:  "Ingress to the operator port",
			edit:  func(t *testing.T, cl *cluster) { ingressPath(t, cl, "/cms").Backend.Service.Port.Name = "operator" },
			check: checkIngress, want: "/cms goes to the operator port of Service/cms-api",
		},
		{
			name:  "ServiceMonitor path",
			edit:  func(t *testing.T, cl *cluster) { byName(t, cl.monitors, "cms-api").Spec.Endpoints[0].Path = "/metric" },
			check: checkServiceMonitors, want: `path "/metric"; want /metrics`,
		},
		{
			name: "events routed to the API",
			edit: func(t *testing.T, cl *cluster) {
				ingressPath(t, cl, "/cms/apps/events").Backend.Service.Name = "cms-api"
			},
			check: checkIngress, want: `/cms/apps/events (Exact) goes to "/usr/local/bin/api serve"`,
		},
		{
			name:  "events path as a prefix",
			edit:  func(t *testing.T, cl *cluster) { ingressPath(t, cl, "/cms/app/events").PathType = "Prefix" },
			check: checkIngress, want: "/cms/app/events (Prefix) goes to",
		},
		{
			name:  "the whole api exposed, /metrics and /status included",
			edit:  func(t *testing.T, cl *cluster) { ingressPath(t, cl, "/cms").Path = "/" },
			check: checkIngress, want: `routes "/" outside /cms`,
		},
		{
			name:  "Ingress to a Service port that does not exist",
			edit:  func(t *testing.T, cl *cluster) { ingressPath(t, cl, "/cms").Backend.Service.Port.Name = "grpc" },
			check: checkIngress, want: `port "grpc"/0 of Service/cms-api`,
		},
		{
			name: "consumer exposed to clients",
			edit: func(t *testing.T, cl *cluster) {
				ingressPath(t, cl, "/cms/app/events").Path = "/metrics"
				ingressPath(t, cl, "/metrics").Backend.Service.Name = "cms-consumer"
			},
			check: checkIngress, want: `/metrics exposes "/usr/local/bin/consumer"`,
		},
		{
			name:  "body size of the old event limit",
			edit:  func(t *testing.T, cl *cluster) { cl.ingresses[0].Metadata.Annotations[bodySizeAnnotation] = "5m" },
			check: checkIngress, want: "5242880 bytes is not above /usr/local/bin/ingest's MAX_BODY_BYTES 10485760",
		},
		{
			name:  "no TLS",
			edit:  func(t *testing.T, cl *cluster) { cl.ingresses[0].Spec.TLS = nil },
			check: checkIngress, want: "no TLS certificate",
		},
		{
			name: "network policy on the wrong port",
			edit: func(t *testing.T, cl *cluster) {
				for i := range cl.policies {
					cl.policies[i].Spec.Ingress[0].Ports[0].Port = &intOrString{num: 9999}
				}
			},
			check: checkNetworkPolicies, want: "admits no traffic to Service/cms-ingest port http",
		},
		{
			name:  "consumers wait for a schema nothing migrates",
			edit:  func(t *testing.T, cl *cluster) { cl.jobs = nil },
			check: checkSchemaMigration, want: `but 0 Jobs run "/usr/local/bin/consumer migrate"`,
		},
		{
			name: "migration Job on another database",
			edit: func(t *testing.T, cl *cluster) {
				c := &cl.jobs[0].Spec.Template.Spec.Containers[0]
				c.Env = append(c.Env, envVar{Name: "CLICKHOUSE_DATABASE", Value: ptr("staging")})
			},
			check: checkSchemaMigration, want: `disagree on CLICKHOUSE_DATABASE: "staging" and "cms"`,
		},
		{
			name:  "migration Job that blocks the next release",
			edit:  func(t *testing.T, cl *cluster) { cl.jobs[0].Spec.TTLSecondsAfterFinished = nil },
			check: checkSchemaMigration, want: "no ttlSecondsAfterFinished",
		},
		{
			name:  "password file not mounted",
			edit:  func(t *testing.T, cl *cluster) { _, c := mustRun(t, cl, consumerBin); c.VolumeMounts = nil },
			check: checkSecretFiles, want: "CLICKHOUSE_PASSWORD_FILE=/etc/cms/secrets/clickhouse-password: no volume mounted at its directory",
		},
		{
			name: "password file from a key the Secret lacks",
			edit: func(t *testing.T, cl *cluster) {
				w, _ := mustRun(t, cl, ingestBin)
				for _, v := range w.Spec.Template.Spec.Volumes {
					if v.Secret != nil && len(v.Secret.Items) > 0 && v.Secret.Items[0].Key == "KAFKA_SASL_PASSWORD" {
						v.Secret.Items[0].Key = "KAFKA_PASSWORD"
					}
				}
			},
			check: checkSecretFiles, want: "has no key KAFKA_PASSWORD",
		},
		{
			name: "password given as a value and as a file",
			edit: func(t *testing.T, cl *cluster) {
				_, c := mustRun(t, cl, consumerBin)
				c.Env = append(c.Env, envVar{Name: "KAFKA_SASL_PASSWORD", Value: ptr("x")})
			},
			check: checkSecretFiles, want: "both KAFKA_SASL_PASSWORD and KAFKA_SASL_PASSWORD_FILE are set",
		},
		{
			name:  "an object outside the namespace",
			edit:  func(t *testing.T, cl *cluster) { cl.headers[len(cl.headers)-1].Metadata.Namespace = "" },
			check: checkLabels, want: "want one, set",
		},
		{
			name:  "a service not deployed",
			edit:  func(t *testing.T, cl *cluster) { _, c := mustRun(t, cl, apiBin); c.Args = nil },
			check: checkBinaries, want: `"/usr/local/bin/api serve" runs in 0 containers`,
		},
	}
	prodBuild := build(t, "overlays/production", nil)
	baseBuild := build(t, "base", nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, m := kustomizations()[1], prodBuild
			if tc.base {
				k, m = kustomizations()[0], baseBuild
			}
			var r recorder
			tc.check(&r, decodeCluster(t, k, m))
			if len(r.errs) > 0 {
				t.Fatalf("fails before the change: %q", r.errs)
			}
			if tc.editFile != nil {
				m = build(t, k.dir, tc.editFile)
			}
			cl := decodeCluster(t, k, m)
			if tc.edit != nil {
				tc.edit(t, cl)
			}
			tc.check(&r, cl)
			for _, e := range r.errs {
				if strings.Contains(e, tc.want) {
					return
				}
			}
			t.Errorf("want an error containing %q; got %q", tc.want, r.errs)
		})
	}
}

// ingressPath returns the Ingress path entry for p.
func ingressPath(t *testing.T, cl *cluster, p string) *ingressPathEntry {
	t.Helper()
	for i := range cl.ingresses {
		for j := range cl.ingresses[i].Spec.Rules {
			paths := cl.ingresses[i].Spec.Rules[j].HTTP.Paths
			for k := range paths {
				if paths[k].Path == p {
					return &paths[k]
				}
			}
		}
	}
	t.Fatalf("no Ingress path %s", p)
	return nil
}
