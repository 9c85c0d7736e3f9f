// Package k8s_test builds the kustomizations under deploy/k8s with the
// kustomize library and checks the objects they produce: probes, resources,
// security, images, environment variables against what the binaries read,
// the wiring of Services, autoscalers, disruption budgets, ServiceMonitors
// and the Ingress, the consumer group's size and the split between
// ConfigMaps and the Secret.
package k8s_test

import (
	"encoding/base64"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const (
	image      = "ghcr.io/assistantcms/cms"
	nonRootUID = 65532

	ingestBin   = "/usr/local/bin/ingest"
	apiBin      = "/usr/local/bin/api serve"
	consumerBin = "/usr/local/bin/consumer"

	bodySizeAnnotation = "nginx.ingress.kubernetes.io/proxy-body-size"
)

// kustomization is one buildable directory and what it must provide.
type kustomization struct {
	name, dir string
	// deployable means a complete environment: a namespace, a pinned
	// image, the Secret, a public host with TLS and network policies. The
	// base provides none of these.
	deployable bool
}

func kustomizations() []kustomization {
	return []kustomization{
		{name: "base", dir: "base"},
		{name: "production", dir: "overlays/production", deployable: true},
	}
}

// reporter is the part of testing.T the checks use, so that a test can
// run them on broken manifests and collect what they say.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// cluster is one build's objects, decoded.
type cluster struct {
	kustomization
	headers    []header
	workloads  []workload
	jobs       []job
	services   []service
	hpas       []hpa
	pdbs       []pdb
	monitors   []serviceMonitor
	ingresses  []ingress
	policies   []networkPolicy
	configMaps map[string]configMap
	// secrets holds each Secret's values, decoded.
	secrets map[string]map[string]string
	// reads holds the variables each binary reads, by command line.
	reads map[string]envNames
	// wantImage is the reference every container must use; pinned says
	// whether the kustomization sets it.
	wantImage string
	pinned    bool
}

func load(t *testing.T, k kustomization) *cluster {
	t.Helper()
	return decodeCluster(t, k, build(t, k.dir, nil))
}

// decodeCluster decodes a build afresh, so callers may change the result.
func decodeCluster(t *testing.T, k kustomization, m *manifests) *cluster {
	t.Helper()
	cl := &cluster{
		kustomization: k,
		headers:       m.headers,
		workloads:     decodeKind[workload](t, m, "Deployment", "StatefulSet"),
		jobs:          decodeKind[job](t, m, "Job"),
		services:      decodeKind[service](t, m, "Service"),
		hpas:          decodeKind[hpa](t, m, "HorizontalPodAutoscaler"),
		pdbs:          decodeKind[pdb](t, m, "PodDisruptionBudget"),
		monitors:      decodeKind[serviceMonitor](t, m, "ServiceMonitor"),
		ingresses:     decodeKind[ingress](t, m, "Ingress"),
		policies:      decodeKind[networkPolicy](t, m, "NetworkPolicy"),
		configMaps:    map[string]configMap{},
		secrets:       map[string]map[string]string{},
	}
	for _, cm := range decodeKind[configMap](t, m, "ConfigMap") {
		cl.configMaps[cm.Metadata.Name] = cm
	}
	for _, s := range decodeKind[secret](t, m, "Secret") {
		values := map[string]string{}
		for k, v := range s.Data {
			b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(v), ""))
			if err != nil {
				t.Fatalf("Secret %s key %s: %v", s.Metadata.Name, k, err)
			}
			values[k] = string(b)
		}
		for k, v := range s.StringData {
			values[k] = v
		}
		cl.secrets[s.Metadata.Name] = values
	}
	var err error
	if cl.reads, err = builtEnv(); err != nil {
		t.Fatal(err)
	}
	if cl.wantImage, cl.pinned, err = kustomizationImage(k.dir, image); err != nil {
		t.Fatal(err)
	}
	return cl
}

// check is one family of assertions on a build.
type check struct {
	name string
	fn   func(r reporter, cl *cluster)
}

func checks() []check {
	return []check{
		{"labels and namespace", checkLabels},
		{"binaries", checkBinaries},
		{"workloads", checkWorkloads},
		{"images", checkImages},
		{"environment", checkEnv},
		{"listen address", checkListenPort},
		{"shutdown", checkShutdown},
		{"autoscaling", checkAutoscaling},
		{"disruption budgets", checkDisruptionBudgets},
		{"services", checkServices},
		{"service monitors", checkServiceMonitors},
		{"ingress", checkIngress},
		{"consumer group", checkConsumerGroup},
		{"live view", checkLiveView},
		{"config and secrets", checkConfigSecrets},
		{"network policies", checkNetworkPolicies},
		{"schema migration", checkSchemaMigration},
		{"secret files", checkSecretFiles},
	}
}

func TestManifests(t *testing.T) {
	for _, k := range kustomizations() {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			cl := load(t, k)
			for _, c := range checks() {
				t.Run(c.name, func(t *testing.T) { c.fn(t, cl) })
			}
		})
	}
}

// TestEveryKustomizationIsChecked fails when a kustomization is added
// without an entry in kustomizations(). Components cannot be built alone;
// they are checked through the overlays that use them.
func TestEveryKustomizationIsChecked(t *testing.T) {
	listed := map[string]bool{}
	for _, k := range kustomizations() {
		listed[k.dir] = true
	}
	found := 0
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "kustomization.yaml" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var k struct {
			Kind string `yaml:"kind"`
		}
		if err := yaml.Unmarshal(b, &k); err != nil {
			return fmt.Errorf("decode %s: %w", p, err)
		}
		if k.Kind == "Component" {
			return nil
		}
		found++
		if dir := filepath.ToSlash(filepath.Dir(p)); !listed[dir] {
			t.Errorf("%s is not in kustomizations(), so nothing checks it", dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found != len(listed) {
		t.Errorf("found %d kustomizations on disk, %d listed", found, len(listed))
	}
}

// describe names an object as Kind/name for messages.
func describe(h header) string { return h.Kind + "/" + h.Metadata.Name }

func commandLine(c container) string {
	return strings.Join(append(slices.Clone(c.Command), c.Args...), " ")
}

// running returns the workload and container that run cmd, or nils.
func (cl *cluster) running(cmd string) (*workload, *container) {
	for i := range cl.workloads {
		w := &cl.workloads[i]
		for j := range w.Spec.Template.Spec.Containers {
			if c := &w.Spec.Template.Spec.Containers[j]; commandLine(*c) == cmd {
				return w, c
			}
		}
	}
	return nil, nil
}

func (cl *cluster) workload(kind, name string) *workload {
	for i := range cl.workloads {
		if w := &cl.workloads[i]; w.Kind == kind && w.Metadata.Name == name {
			return w
		}
	}
	return nil
}

// podsSelected returns the workloads whose pods sel picks.
func (cl *cluster) podsSelected(r reporter, what string, sel labelSelector) []*workload {
	r.Helper()
	var out []*workload
	for i := range cl.workloads {
		ok, err := selects(sel, cl.workloads[i].Spec.Template.Metadata.Labels)
		if err != nil {
			r.Errorf("%s: selector: %v", what, err)
			return nil
		}
		if ok {
			out = append(out, &cl.workloads[i])
		}
	}
	return out
}

// servicesOf returns the Services whose selector picks w's pods.
func (cl *cluster) servicesOf(w *workload) []*service {
	var out []*service
	for i := range cl.services {
		s := &cl.services[i]
		if ok, err := selects(labelSelector{MatchLabels: s.Spec.Selector}, w.Spec.Template.Metadata.Labels); err == nil && ok {
			out = append(out, s)
		}
	}
	return out
}

func containerPort(c container, p intOrString) (int, bool) {
	for _, cp := range c.Ports {
		if (p.str != "" && cp.Name == p.str) || (p.str == "" && cp.ContainerPort == p.num) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// workloadPort reports whether some container of w has port p.
func workloadPort(w *workload, p intOrString) (int, bool) {
	for _, c := range w.Spec.Template.Spec.Containers {
		if n, ok := containerPort(c, p); ok {
			return n, true
		}
	}
	return 0, false
}

// envValue is where one of a container's variables comes from.
type envValue struct {
	source string
	// value is known for literals and ConfigMap entries.
	value    *string
	secret   *keyRef
	resource string
	// container is the resourceFieldRef's container, if named.
	container string
}

// env resolves a container's variables. Anything ambiguous or dangling is
// a problem: a variable set twice (Kubernetes silently lets the later one
// win), a missing ConfigMap, envFrom on a Secret (which hides the names a
// container receives) or a prefix.
func (cl *cluster) env(c container) (map[string]envValue, []string) {
	out := map[string]envValue{}
	var problems []string
	add := func(name string, v envValue) {
		if prev, ok := out[name]; ok {
			problems = append(problems, fmt.Sprintf("%s is set twice, from %s and %s", name, prev.source, v.source))
		}
		out[name] = v
	}
	for _, ef := range c.EnvFrom {
		switch {
		case ef.Prefix != "":
			problems = append(problems, fmt.Sprintf("envFrom with prefix %q renames the variables", ef.Prefix))
		case ef.SecretRef != nil:
			problems = append(problems, fmt.Sprintf("envFrom Secret %s: bind each secret variable with secretKeyRef instead", ef.SecretRef.Name))
		case ef.ConfigMapRef != nil:
			cm, ok := cl.configMaps[ef.ConfigMapRef.Name]
			if !ok {
				problems = append(problems, fmt.Sprintf("envFrom ConfigMap %s is not in the build", ef.ConfigMapRef.Name))
				continue
			}
			for _, k := range sortedKeys(cm.Data) {
				add(k, envValue{source: "ConfigMap " + cm.Metadata.Name, value: ptr(cm.Data[k])})
			}
		}
	}
	for _, e := range c.Env {
		switch vf := e.ValueFrom; {
		case vf == nil:
			add(e.Name, envValue{source: "a literal value", value: e.Value})
		case vf.SecretKeyRef != nil:
			add(e.Name, envValue{source: "Secret " + vf.SecretKeyRef.Name, secret: vf.SecretKeyRef})
		case vf.ConfigMapKeyRef != nil:
			cm, ok := cl.configMaps[vf.ConfigMapKeyRef.Name]
			v, found := cm.Data[vf.ConfigMapKeyRef.Key]
			if !ok || !found {
				problems = append(problems, fmt.Sprintf("%s: ConfigMap %s has no key %s", e.Name, vf.ConfigMapKeyRef.Name, vf.ConfigMapKeyRef.Key))
			}
			add(e.Name, envValue{source: "ConfigMap " + vf.ConfigMapKeyRef.Name, value: &v})
		case vf.ResourceFieldRef != nil:
			add(e.Name, envValue{source: "resource " + vf.ResourceFieldRef.Resource, resource: vf.ResourceFieldRef.Resource, container: vf.ResourceFieldRef.ContainerName})
		default:
			add(e.Name, envValue{source: "a field reference"})
		}
	}
	return out, problems
}

// knownValue returns a variable's value when the manifests fix it.
func (cl *cluster) knownValue(c container, name string) (string, error) {
	env, problems := cl.env(c)
	if len(problems) > 0 {
		return "", fmt.Errorf("environment: %s", strings.Join(problems, "; "))
	}
	v, ok := env[name]
	if !ok || v.value == nil {
		return "", fmt.Errorf("%s is not set to a value in a ConfigMap or literal", name)
	}
	return *v.value, nil
}

// looksSecret reports whether a variable's name says it holds a secret.
// CONTENT_DB is a DSN that will carry the PostgreSQL password.
func looksSecret(name string) bool {
	words := strings.Split(name, "_")
	switch words[len(words)-1] {
	case "PASSWORD", "KEY", "TOKEN", "SECRET", "DSN", "CREDENTIALS":
		return true
	}
	return name == "CONTENT_DB"
}

func checkLabels(r reporter, cl *cluster) {
	r.Helper()
	namespaces := map[string]bool{}
	for _, h := range cl.headers {
		l := h.Metadata.Labels
		if l["app.kubernetes.io/name"] != "cms" || l["app.kubernetes.io/part-of"] != "assistantcms" {
			r.Errorf("%s: labels %v lack app.kubernetes.io/name=cms and part-of=assistantcms", describe(h), l)
		}
		switch h.Kind {
		case "Deployment", "StatefulSet", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget", "ServiceMonitor", "NetworkPolicy":
			if l["app.kubernetes.io/component"] == "" {
				r.Errorf("%s: no app.kubernetes.io/component label", describe(h))
			}
		}
		if h.Kind != "Namespace" {
			namespaces[h.Metadata.Namespace] = true
		}
	}
	switch {
	case !cl.deployable && (len(namespaces) != 1 || !namespaces[""]):
		r.Errorf("the base sets namespaces %v; it must leave them to the overlays", namespaces)
	case cl.deployable && (len(namespaces) != 1 || namespaces[""]):
		r.Errorf("objects are in namespaces %v; want one, set", namespaces)
	}
}

func checkBinaries(r reporter, cl *cluster) {
	r.Helper()
	count := map[string]int{}
	for _, w := range cl.workloads {
		for _, c := range w.Spec.Template.Spec.Containers {
			cmd := commandLine(c)
			if _, ok := binaries()[cmd]; !ok {
				r.Errorf("%s container %s runs %q, which is none of the image's services", describe(w.header), c.Name, cmd)
			}
			count[cmd]++
		}
	}
	for cmd := range binaries() {
		if count[cmd] != 1 {
			r.Errorf("%q runs in %d containers; want 1", cmd, count[cmd])
		}
	}
}

func checkWorkloads(r reporter, cl *cluster) {
	r.Helper()
	if len(cl.workloads) == 0 {
		r.Errorf("no Deployments or StatefulSets")
	}
	for _, w := range cl.workloads {
		name := describe(w.header)
		pod := w.Spec.Template
		if ok, err := selects(w.Spec.Selector, pod.Metadata.Labels); err != nil || !ok {
			r.Errorf("%s: selector %v does not pick its own pods %v (%v)", name, w.Spec.Selector.MatchLabels, pod.Metadata.Labels, err)
		}
		for _, l := range []string{"app.kubernetes.io/name", "app.kubernetes.io/part-of", "app.kubernetes.io/component"} {
			if pod.Metadata.Labels[l] == "" {
				r.Errorf("%s: pod label %s missing", name, l)
			}
		}
		ps := pod.Spec
		if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
			r.Errorf("%s: automountServiceAccountToken must be false; nothing here calls the Kubernetes API", name)
		}
		switch sc := ps.SecurityContext; {
		case sc == nil:
			r.Errorf("%s: no pod securityContext", name)
		default:
			if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				r.Errorf("%s: runAsNonRoot must be true", name)
			}
			if sc.RunAsUser == nil || *sc.RunAsUser != nonRootUID {
				r.Errorf("%s: runAsUser must be %d, the image's nonroot user", name, nonRootUID)
			}
			if sc.SeccompProfile == nil || sc.SeccompProfile.Type != "RuntimeDefault" {
				r.Errorf("%s: seccompProfile must be RuntimeDefault", name)
			}
		}
		spread := ps.Affinity != nil && ps.Affinity.PodAntiAffinity != nil
		for _, tsc := range ps.TopologySpreadConstraints {
			ok, err := selects(tsc.LabelSelector, pod.Metadata.Labels)
			if err != nil || !ok {
				r.Errorf("%s: topology spread on %s does not select its own pods (%v)", name, tsc.TopologyKey, err)
			}
			spread = spread || ok
		}
		if !spread {
			r.Errorf("%s: neither topologySpreadConstraints nor podAntiAffinity spreads its pods", name)
		}
		if len(ps.Containers) == 0 {
			r.Errorf("%s: no containers", name)
		}
		for _, c := range slices.Concat(ps.InitContainers, ps.Containers) {
			checkContainer(r, name, c)
		}
		for _, c := range ps.Containers {
			checkProbes(r, name, c)
			// The image is distroless: there is no shell or sleep binary
			// to exec.
			if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Exec != nil {
				r.Errorf("%s container %s: preStop exec cannot run in the distroless image; use the sleep action", name, c.Name)
			}
		}
	}
}

func checkContainer(r reporter, workload string, c container) {
	r.Helper()
	name := workload + " container " + c.Name
	switch sc := c.SecurityContext; {
	case sc == nil:
		r.Errorf("%s: no securityContext", name)
	default:
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			r.Errorf("%s: allowPrivilegeEscalation must be false", name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			r.Errorf("%s: readOnlyRootFilesystem must be true", name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			r.Errorf("%s: privileged", name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			r.Errorf("%s: capabilities must drop ALL and add none", name)
		}
	}
	for _, res := range []string{"cpu", "memory"} {
		req, okReq := c.Resources.Requests[res]
		lim, okLim := c.Resources.Limits[res]
		if !okReq || !okLim {
			r.Errorf("%s: %s needs requests and limits (requests %q, limits %q)", name, res, req, lim)
			continue
		}
		rq, err1 := parseQuantity(req)
		lq, err2 := parseQuantity(lim)
		switch {
		case err1 != nil || err2 != nil:
			r.Errorf("%s: %s: %v %v", name, res, err1, err2)
		case rq <= 0:
			r.Errorf("%s: %s request %s must be above zero", name, res, req)
		case rq > lq:
			r.Errorf("%s: %s request %s exceeds the limit %s", name, res, req, lim)
		}
	}
}

func checkProbes(r reporter, workload string, c container) {
	r.Helper()
	name := workload + " container " + c.Name
	for _, p := range []struct {
		field    string
		probe    *probe
		path     string
		required bool
	}{
		{"readinessProbe", c.ReadinessProbe, "/readyz", true},
		{"livenessProbe", c.LivenessProbe, "/healthz", true},
		{"startupProbe", c.StartupProbe, "/healthz", false},
	} {
		switch {
		case p.probe == nil && p.required:
			r.Errorf("%s: no %s", name, p.field)
		case p.probe == nil:
		case p.probe.HTTPGet == nil:
			r.Errorf("%s: %s must be an HTTP GET of %s", name, p.field, p.path)
		default:
			if p.probe.HTTPGet.Path != p.path {
				r.Errorf("%s: %s path %q; want %q", name, p.field, p.probe.HTTPGet.Path, p.path)
			}
			if _, ok := containerPort(c, p.probe.HTTPGet.Port); !ok {
				r.Errorf("%s: %s port %s is not a port of the container", name, p.field, p.probe.HTTPGet.Port)
			}
		}
	}
}

func checkImages(r reporter, cl *cluster) {
	r.Helper()
	if cl.deployable {
		// What follows the name: ":tag", "@digest" or both.
		ref := strings.TrimPrefix(cl.wantImage, image)
		if !cl.pinned || ref == "" || ref == ":latest" {
			r.Errorf("%s/kustomization.yaml must pin %s to a tag or digest other than latest (images:); it gives %q", cl.dir, image, cl.wantImage)
		}
	}
	for _, w := range cl.workloads {
		for _, c := range slices.Concat(w.Spec.Template.Spec.InitContainers, w.Spec.Template.Spec.Containers) {
			if c.Image != cl.wantImage {
				r.Errorf("%s container %s: image %q; want %q", describe(w.header), c.Name, c.Image, cl.wantImage)
			}
		}
	}
}

func checkEnv(r reporter, cl *cluster) {
	r.Helper()
	for _, w := range cl.workloads {
		for _, c := range w.Spec.Template.Spec.Containers {
			name := describe(w.header) + " container " + c.Name
			env, problems := cl.env(c)
			for _, p := range problems {
				r.Errorf("%s: %s", name, p)
			}
			cmd := commandLine(c)
			reads, ok := cl.reads[cmd]
			if !ok {
				continue // checkBinaries reports it
			}
			for _, n := range sortedKeys(env) {
				v := env[n]
				switch {
				case n == "GOMEMLIMIT":
					// Read by the Go runtime: must follow the container's
					// own memory limit.
					if v.resource != "limits.memory" || (v.container != "" && v.container != c.Name) {
						r.Errorf("%s: GOMEMLIMIT from %s; want this container's limits.memory", name, v.source)
					}
				case reads.former[n] != "":
					r.Errorf("%s: %s (from %s) is the deprecated former name of %s; set %s instead", name, n, v.source, reads.former[n], reads.former[n])
				case !reads.read[n]:
					r.Errorf("%s: %s (from %s) is not a variable %s reads", name, n, v.source, cmd)
				}
				if looksSecret(n) && v.secret == nil {
					r.Errorf("%s: %s comes from %s; a secret must come from a Secret via secretKeyRef", name, n, v.source)
				}
			}
		}
	}
}

// operatorPort names the container and Service port of the operator
// address (OPERATOR_ADDR): /metrics answers there only.
const operatorPort = "operator"

// checkListenPort checks that each server's port named http is its listen
// address and its port named operator its operator address, apart.
func checkListenPort(r reporter, cl *cluster) {
	r.Helper()
	for cmd, b := range binaries() {
		w, c := cl.running(cmd)
		if w == nil {
			continue // checkBinaries reports it
		}
		name := describe(w.header) + " container " + c.Name
		ports := map[string]int{}
		for _, a := range []struct{ env, port string }{{b.addrEnv, "http"}, {"OPERATOR_ADDR", operatorPort}} {
			n, ok := addrPort(r, cl, c, name, a.env)
			if !ok {
				continue
			}
			if got, ok := containerPort(*c, intOrString{str: a.port}); !ok || got != n {
				r.Errorf("%s: listens on %d (%s) but its port named %s is %d", name, n, a.env, a.port, got)
			}
			ports[a.port] = n
		}
		if ports["http"] != 0 && ports["http"] == ports[operatorPort] {
			r.Errorf("%s: the operator address is the listen address", name)
		}
	}
}

// addrPort returns the port of the address in the container's variable
// env, reporting why it has none.
func addrPort(r reporter, cl *cluster, c *container, name, env string) (int, bool) {
	r.Helper()
	addr, err := cl.knownValue(*c, env)
	if err != nil {
		r.Errorf("%s: %v", name, err)
		return 0, false
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		r.Errorf("%s: %s=%q: %v", name, env, addr, err)
		return 0, false
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		r.Errorf("%s: %s=%q: port is not a number", name, env, addr)
		return 0, false
	}
	return n, true
}

func checkShutdown(r reporter, cl *cluster) {
	r.Helper()
	for _, w := range cl.workloads {
		grace := w.Spec.Template.Spec.TerminationGracePeriodSeconds
		for _, c := range w.Spec.Template.Spec.Containers {
			name := describe(w.header) + " container " + c.Name
			v, err := cl.knownValue(c, "SHUTDOWN_TIMEOUT")
			if err != nil {
				r.Errorf("%s: %v", name, err)
				continue
			}
			timeout, err := time.ParseDuration(v)
			if err != nil {
				r.Errorf("%s: SHUTDOWN_TIMEOUT=%q: %v", name, v, err)
				continue
			}
			var sleep time.Duration
			if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
				sleep = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
			}
			// The grace period counts from the start of the preStop hook.
			if grace == nil || time.Duration(*grace)*time.Second <= sleep+timeout {
				r.Errorf("%s: terminationGracePeriodSeconds %v must exceed the preStop sleep %s plus SHUTDOWN_TIMEOUT %s", name, ptrString(grace), sleep, timeout)
			}
		}
	}
}

func checkAutoscaling(r reporter, cl *cluster) {
	r.Helper()
	scaled := map[*workload]int{}
	for _, h := range cl.hpas {
		name := describe(h.header)
		if h.APIVersion != "autoscaling/v2" {
			r.Errorf("%s: apiVersion %s; want autoscaling/v2", name, h.APIVersion)
		}
		ref := h.Spec.ScaleTargetRef
		w := cl.workload(ref.Kind, ref.Name)
		if w == nil || ref.APIVersion != "apps/v1" {
			r.Errorf("%s: target %s %s/%s is not in the build", name, ref.APIVersion, ref.Kind, ref.Name)
			continue
		}
		scaled[w]++
		if w.Spec.Replicas != nil {
			r.Errorf("%s: %s sets replicas, which every apply would reset under the autoscaler", name, describe(w.header))
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 {
			r.Errorf("%s: minReplicas %v; want at least 2", name, ptrString(h.Spec.MinReplicas))
		} else if h.Spec.MaxReplicas < *h.Spec.MinReplicas {
			r.Errorf("%s: maxReplicas %d below minReplicas %d", name, h.Spec.MaxReplicas, *h.Spec.MinReplicas)
		}
		cpu := false
		for _, m := range h.Spec.Metrics {
			if m.Type == "Resource" && m.Resource != nil && m.Resource.Name == "cpu" && m.Resource.Target.Type == "Utilization" {
				u := m.Resource.Target.AverageUtilization
				cpu = u > 0 && u <= 100
			}
		}
		if !cpu {
			r.Errorf("%s: no CPU utilisation target between 1 and 100%%", name)
		}
	}
	for _, cmd := range []string{ingestBin, apiBin} {
		if w, _ := cl.running(cmd); w != nil && scaled[w] != 1 {
			r.Errorf("%s (%s) has %d autoscalers; want 1", describe(w.header), cmd, scaled[w])
		}
	}
	if w, _ := cl.running(consumerBin); w != nil && scaled[w] != 0 {
		r.Errorf("%s (the consumer) is autoscaled; its replicas are bounded by the partitions", describe(w.header))
	}
}

func checkDisruptionBudgets(r reporter, cl *cluster) {
	r.Helper()
	budgets := map[*workload]int{}
	for _, p := range cl.pdbs {
		name := describe(p.header)
		if p.APIVersion != "policy/v1" {
			r.Errorf("%s: apiVersion %s; want policy/v1", name, p.APIVersion)
		}
		ws := cl.podsSelected(r, name, p.Spec.Selector)
		if len(ws) != 1 {
			r.Errorf("%s: selector %v picks the pods of %d workloads; want 1", name, p.Spec.Selector.MatchLabels, len(ws))
			continue
		}
		w := ws[0]
		budgets[w]++
		switch {
		case (p.Spec.MinAvailable == nil) == (p.Spec.MaxUnavailable == nil):
			r.Errorf("%s: set exactly one of minAvailable and maxUnavailable", name)
		case p.Spec.MaxUnavailable != nil:
			if mu := *p.Spec.MaxUnavailable; mu.num < 1 && (mu.str == "" || mu.str == "0%") {
				r.Errorf("%s: maxUnavailable %s blocks every eviction", name, mu)
			}
		default:
			// minAvailable must stay below the smallest replica count,
			// or no node holding one of the pods can be drained.
			fewest := cl.minReplicas(w)
			if ma := *p.Spec.MinAvailable; ma.str != "" || ma.num >= fewest {
				r.Errorf("%s: minAvailable %s with at least %d replicas blocks drains", name, ma, fewest)
			}
		}
	}
	for i := range cl.workloads {
		if w := &cl.workloads[i]; budgets[w] != 1 {
			r.Errorf("%s has %d PodDisruptionBudgets; want 1", describe(w.header), budgets[w])
		}
	}
}

// minReplicas is the fewest pods w runs: its autoscaler's minimum, else
// its replicas (1 when unset).
func (cl *cluster) minReplicas(w *workload) int {
	for _, h := range cl.hpas {
		if ref := h.Spec.ScaleTargetRef; ref.Kind == w.Kind && ref.Name == w.Metadata.Name && h.Spec.MinReplicas != nil {
			return *h.Spec.MinReplicas
		}
	}
	if w.Spec.Replicas != nil {
		return *w.Spec.Replicas
	}
	return 1
}

func checkServices(r reporter, cl *cluster) {
	r.Helper()
	for _, s := range cl.services {
		name := describe(s.header)
		ws := cl.podsSelected(r, name, labelSelector{MatchLabels: s.Spec.Selector})
		if len(ws) != 1 {
			r.Errorf("%s: selector %v picks the pods of %d workloads; want 1", name, s.Spec.Selector, len(ws))
			continue
		}
		if len(s.Spec.Ports) == 0 {
			r.Errorf("%s: no ports", name)
		}
		for _, p := range s.Spec.Ports {
			target := p.TargetPort
			if target == (intOrString{}) {
				target = intOrString{num: p.Port}
			}
			if _, ok := workloadPort(ws[0], target); !ok {
				r.Errorf("%s: port %s targets %s, which %s's containers do not have", name, p.Name, target, describe(ws[0].header))
			}
		}
	}
	for i := range cl.workloads {
		if w := &cl.workloads[i]; len(cl.servicesOf(w)) == 0 {
			r.Errorf("%s: no Service selects its pods", describe(w.header))
		}
	}
}

func checkServiceMonitors(r reporter, cl *cluster) {
	r.Helper()
	scraped := map[string]bool{}
	for _, m := range cl.monitors {
		name := describe(m.header)
		if m.APIVersion != "monitoring.coreos.com/v1" {
			r.Errorf("%s: apiVersion %s; want monitoring.coreos.com/v1", name, m.APIVersion)
		}
		var matched []*service
		for i := range cl.services {
			ok, err := selects(m.Spec.Selector, cl.services[i].Metadata.Labels)
			if err != nil {
				r.Errorf("%s: selector: %v", name, err)
				break
			}
			if ok {
				matched = append(matched, &cl.services[i])
			}
		}
		if len(matched) == 0 {
			r.Errorf("%s: selector %v picks no Service", name, m.Spec.Selector.MatchLabels)
		}
		if len(m.Spec.Endpoints) == 0 {
			r.Errorf("%s: no endpoints", name)
		}
		for _, e := range m.Spec.Endpoints {
			if e.Path != "/metrics" {
				r.Errorf("%s: path %q; want /metrics", name, e.Path)
			}
			if e.Port != operatorPort {
				r.Errorf("%s: scrapes port %q; /metrics answers on %q only", name, e.Port, operatorPort)
			}
			for _, s := range matched {
				if !slices.ContainsFunc(s.Spec.Ports, func(p servicePort) bool { return e.Port != "" && p.Name == e.Port }) {
					r.Errorf("%s: %s has no port named %q", name, describe(s.header), e.Port)
					continue
				}
				scraped[s.Metadata.Name] = true
			}
		}
	}
	for _, s := range cl.services {
		if !scraped[s.Metadata.Name] {
			r.Errorf("%s: no ServiceMonitor scrapes it", describe(s.header))
		}
	}
}

func checkIngress(r reporter, cl *cluster) {
	r.Helper()
	if len(cl.ingresses) != 1 {
		r.Errorf("%d Ingresses; want one address for clients", len(cl.ingresses))
		return
	}
	ing := cl.ingresses[0]
	name := describe(ing.header)
	if ing.APIVersion != "networking.k8s.io/v1" {
		r.Errorf("%s: apiVersion %s; want networking.k8s.io/v1", name, ing.APIVersion)
	}
	if len(ing.Spec.Rules) != 1 {
		r.Errorf("%s: %d rules; want one host", name, len(ing.Spec.Rules))
		return
	}
	rule := ing.Spec.Rules[0]
	if cl.deployable {
		if rule.Host == "" {
			r.Errorf("%s: no host", name)
		}
		if !slices.ContainsFunc(ing.Spec.TLS, func(t ingressTLS) bool { return t.SecretName != "" && slices.Contains(t.Hosts, rule.Host) }) {
			r.Errorf("%s: no TLS certificate for host %q", name, rule.Host)
		}
	}
	// backendRuns returns the command run by the workload behind a
	// backend, checking the Service and its port.
	backendRuns := func(path string, b *serviceBackend) string {
		if b == nil {
			r.Errorf("%s: %s has no Service backend", name, path)
			return ""
		}
		i := slices.IndexFunc(cl.services, func(s service) bool { return s.Metadata.Name == b.Name })
		if i < 0 {
			r.Errorf("%s: %s goes to Service %s, which is not in the build", name, path, b.Name)
			return ""
		}
		s := cl.services[i]
		if !slices.ContainsFunc(s.Spec.Ports, func(p servicePort) bool {
			return (b.Port.Name != "" && p.Name == b.Port.Name) || (b.Port.Name == "" && p.Port == b.Port.Number)
		}) {
			r.Errorf("%s: %s goes to port %q/%d of %s, which it does not have", name, path, b.Port.Name, b.Port.Number, describe(s.header))
		}
		for _, sp := range s.Spec.Ports {
			if (b.Port.Name != "" && sp.Name == b.Port.Name) || (b.Port.Name == "" && sp.Port == b.Port.Number) {
				if sp.Name == operatorPort || sp.TargetPort.str == operatorPort {
					r.Errorf("%s: %s goes to the operator port of %s: its /metrics, /status and /analytics would reach clients", name, path, describe(s.header))
				}
			}
		}
		for i := range cl.workloads {
			w := &cl.workloads[i]
			if slices.ContainsFunc(cl.servicesOf(w), func(x *service) bool { return x.Metadata.Name == s.Metadata.Name }) && len(w.Spec.Template.Spec.Containers) > 0 {
				return commandLine(w.Spec.Template.Spec.Containers[0])
			}
		}
		r.Errorf("%s: %s goes to %s, which selects no pods", name, path, describe(s.header))
		return ""
	}
	want := map[string]struct{ pathType, cmd string }{
		"/cms/app/events":  {"Exact", ingestBin},
		"/cms/apps/events": {"Exact", ingestBin},
		"/cms":             {"Prefix", apiBin},
	}
	seen := map[string]bool{}
	for _, p := range rule.HTTP.Paths {
		cmd := backendRuns(p.Path, p.Backend.Service)
		// Clients call /cms paths only; /metrics, /status and the health
		// endpoints stay inside the cluster.
		if p.Path != "/cms" && !strings.HasPrefix(p.Path, "/cms/") {
			r.Errorf("%s: routes %q outside /cms", name, p.Path)
		}
		w, ok := want[p.Path]
		switch {
		case !ok:
			if cmd != ingestBin && cmd != apiBin {
				r.Errorf("%s: %s exposes %q to clients", name, p.Path, cmd)
			}
		case p.PathType != w.pathType || cmd != w.cmd:
			r.Errorf("%s: %s (%s) goes to %q; want %s to %q", name, p.Path, p.PathType, cmd, w.pathType, w.cmd)
		}
		seen[p.Path] = true
	}
	for _, p := range sortedKeys(want) {
		if !seen[p] {
			r.Errorf("%s: no route for %s", name, p)
		}
	}
	// The proxy's body limit must sit above each service's own, so that
	// clients get the service's JSON 413.
	size, err := parseNginxSize(ing.Metadata.Annotations[bodySizeAnnotation])
	if err != nil {
		r.Errorf("%s: %s: %v", name, bodySizeAnnotation, err)
		return
	}
	for _, limit := range []struct{ cmd, env string }{{ingestBin, "MAX_BODY_BYTES"}, {apiBin, "GRAPHQL_MAX_BODY_BYTES"}} {
		_, c := cl.running(limit.cmd)
		if c == nil {
			continue // checkBinaries reports it
		}
		v, err := cl.knownValue(*c, limit.env)
		if err != nil {
			r.Errorf("%s: %v", limit.cmd, err)
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			r.Errorf("%s: %s=%q: %v", limit.cmd, limit.env, v, err)
			continue
		}
		if size <= n {
			r.Errorf("%s: %s %d bytes is not above %s's %s %d", name, bodySizeAnnotation, size, limit.cmd, limit.env, n)
		}
	}
}

func checkConsumerGroup(r reporter, cl *cluster) {
	r.Helper()
	w, c := cl.running(consumerBin)
	_, in := cl.running(ingestBin)
	if w == nil || in == nil {
		return // checkBinaries reports it
	}
	name := describe(w.header)
	v, err := cl.knownValue(*c, "TOPIC_PARTITIONS")
	if err != nil {
		r.Errorf("%s: %v", name, err)
		return
	}
	partitions, err := strconv.Atoi(v)
	if err != nil {
		r.Errorf("%s: TOPIC_PARTITIONS=%q: %v", name, v, err)
		return
	}
	// Kafka gives a partition to one member of a group: more consumers
	// than partitions sit idle.
	if w.Spec.Replicas == nil || *w.Spec.Replicas < 1 || *w.Spec.Replicas > partitions {
		r.Errorf("%s: replicas %v; want 1 to TOPIC_PARTITIONS (%d)", name, ptrString(w.Spec.Replicas), partitions)
	}
	// ingest creates and writes the topic the consumer reads.
	for _, n := range []string{"KAFKA_BROKERS", "EVENTS_TOPIC", "TOPIC_PARTITIONS"} {
		cv, err1 := cl.knownValue(*c, n)
		iv, err2 := cl.knownValue(*in, n)
		if err1 != nil || err2 != nil || cv != iv {
			r.Errorf("ingest and consumer disagree on %s: %q and %q (%v %v)", n, iv, cv, err2, err1)
		}
	}
}

// checkLiveView checks that the api reads the topics ingest writes: its
// live view of events needs the brokers, and tails both topics.
func checkLiveView(r reporter, cl *cluster) {
	r.Helper()
	_, api := cl.running(apiBin)
	_, in := cl.running(ingestBin)
	if api == nil || in == nil {
		return // checkBinaries reports it
	}
	for _, n := range []string{"KAFKA_BROKERS", "EVENTS_TOPIC", "QUARANTINE_TOPIC"} {
		av, err1 := cl.knownValue(*api, n)
		iv, err2 := cl.knownValue(*in, n)
		if err1 != nil || err2 != nil || av != iv {
			r.Errorf("the api's live view and ingest disagree on %s: %q and %q (%v %v)", n, av, iv, err1, err2)
		}
	}
}

func checkConfigSecrets(r reporter, cl *cluster) {
	r.Helper()
	if !cl.deployable && len(cl.secrets) > 0 {
		r.Errorf("the base holds Secrets %v; secret values belong to the overlays", sortedKeys(cl.secrets))
	}
	if cl.deployable && len(cl.secrets) == 0 {
		r.Errorf("no Secret: the workloads' secretKeyRefs dangle")
	}
	secretNames := map[string]bool{}
	for _, w := range cl.workloads {
		for _, c := range w.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					continue
				}
				secretNames[e.Name] = true
				ref := e.ValueFrom.SecretKeyRef
				if !cl.deployable {
					continue // the Secret comes from an overlay
				}
				values, ok := cl.secrets[ref.Name]
				if _, found := values[ref.Key]; (!ok || !found) && !ref.Optional {
					r.Errorf("%s container %s: %s refers to Secret %s key %s, which the build lacks", describe(w.header), c.Name, e.Name, ref.Name, ref.Key)
				}
			}
		}
	}
	for _, cmName := range sortedKeys(cl.configMaps) {
		cm := cl.configMaps[cmName]
		for _, k := range sortedKeys(cm.Data) {
			if looksSecret(k) || secretNames[k] {
				r.Errorf("ConfigMap %s holds %s, a secret", cmName, k)
			}
			for _, sName := range sortedKeys(cl.secrets) {
				for sk, sv := range cl.secrets[sName] {
					if sv != "" && strings.Contains(cm.Data[k], sv) {
						r.Errorf("ConfigMap %s key %s holds the value of Secret %s key %s", cmName, k, sName, sk)
					}
				}
			}
		}
	}
}

func checkNetworkPolicies(r reporter, cl *cluster) {
	r.Helper()
	if cl.deployable && len(cl.policies) == 0 {
		r.Errorf("no NetworkPolicy")
	}
	covered := map[*workload]bool{}
	for _, p := range cl.policies {
		name := describe(p.header)
		if !slices.Contains(p.Spec.PolicyTypes, "Ingress") {
			continue
		}
		ws := cl.podsSelected(r, name, p.Spec.PodSelector)
		if len(ws) == 0 {
			r.Errorf("%s: selects no pods", name)
		}
		for _, w := range ws {
			covered[w] = true
			// Once selected, a pod gets only what some rule admits: each
			// port its Services send to must be admitted.
			for _, s := range cl.servicesOf(w) {
				for _, sp := range s.Spec.Ports {
					target, _ := workloadPort(w, sp.TargetPort)
					admitted := slices.ContainsFunc(p.Spec.Ingress, func(rule policyRule) bool {
						if len(rule.Ports) == 0 {
							return true
						}
						for _, rp := range rule.Ports {
							if rp.Port == nil {
								return true
							}
							if n, ok := workloadPort(w, *rp.Port); ok && n == target {
								return true
							}
						}
						return false
					})
					if !admitted {
						r.Errorf("%s: admits no traffic to %s port %s of %s", name, describe(s.header), sp.Name, describe(w.header))
					}
				}
			}
		}
	}
	if cl.deployable {
		for i := range cl.workloads {
			if w := &cl.workloads[i]; !covered[w] {
				r.Errorf("%s: no NetworkPolicy selects its pods", describe(w.header))
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// migrateBin is the command line of the Job that applies the ClickHouse
// schema; it reads the consumer's variables.
const migrateBin = consumerBin + " migrate"

// pods lists every pod template of the build, workloads' and Jobs', by
// the object's description.
func (cl *cluster) pods() map[string]*podSpec {
	out := map[string]*podSpec{}
	for i := range cl.workloads {
		out[describe(cl.workloads[i].header)] = &cl.workloads[i].Spec.Template.Spec
	}
	for i := range cl.jobs {
		out[describe(cl.jobs[i].header)] = &cl.jobs[i].Spec.Template.Spec
	}
	return out
}

// checkSchemaMigration checks that consumers told to wait for the schema
// (CLICKHOUSE_SCHEMA=wait) have a Job that applies it, with the same
// ClickHouse settings, and that the Job is as locked down as the
// services and can be created again by the next release.
func checkSchemaMigration(r reporter, cl *cluster) {
	r.Helper()
	_, c := cl.running(consumerBin)
	if c == nil {
		return // checkBinaries reports it
	}
	consumerEnv, _ := cl.env(*c)
	var migrates []*job
	for i := range cl.jobs {
		for _, jc := range cl.jobs[i].Spec.Template.Spec.Containers {
			if commandLine(jc) == migrateBin {
				migrates = append(migrates, &cl.jobs[i])
			}
		}
	}
	mode := "apply"
	if v, ok := consumerEnv["CLICKHOUSE_SCHEMA"]; ok && v.value != nil {
		mode = *v.value
	}
	if mode == "wait" && len(migrates) != 1 {
		r.Errorf("the consumer waits for the schema (CLICKHOUSE_SCHEMA=wait) but %d Jobs run %q; want 1", len(migrates), migrateBin)
	}
	for _, j := range migrates {
		name := describe(j.header)
		pod := j.Spec.Template.Spec
		if pod.RestartPolicy != "OnFailure" && pod.RestartPolicy != "Never" {
			r.Errorf("%s: restartPolicy %q; a Job needs OnFailure or Never", name, pod.RestartPolicy)
		}
		if j.Spec.BackoffLimit == nil || j.Spec.ActiveDeadlineSeconds == nil {
			r.Errorf("%s: backoffLimit and activeDeadlineSeconds must bound the retries", name)
		}
		// A Job's template is immutable: the next release can create it
		// again only once the finished one has gone.
		if j.Spec.TTLSecondsAfterFinished == nil {
			r.Errorf("%s: no ttlSecondsAfterFinished; the next release's apply would fail on the finished Job", name)
		}
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			r.Errorf("%s: automountServiceAccountToken must be false", name)
		}
		if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != nonRootUID {
			r.Errorf("%s: the pod must run as the image's nonroot user %d", name, nonRootUID)
		}
		for _, jc := range pod.Containers {
			checkContainer(r, name, jc)
			if jc.Image != cl.wantImage {
				r.Errorf("%s container %s: image %q; want %q", name, jc.Name, jc.Image, cl.wantImage)
			}
			jobEnv, problems := cl.env(jc)
			for _, p := range problems {
				r.Errorf("%s container %s: %s", name, jc.Name, p)
			}
			reads := cl.reads[consumerBin]
			for _, n := range sortedKeys(jobEnv) {
				if !reads.read[n] {
					r.Errorf("%s container %s: %s is not a variable the consumer reads", name, jc.Name, n)
				}
			}
			// The schema must be made where, and as, the consumers
			// expect it: every ClickHouse setting agrees.
			for _, n := range sortedKeys(reads.read) {
				if !strings.HasPrefix(n, "CLICKHOUSE_") || n == "CLICKHOUSE_SCHEMA" {
					continue
				}
				cv, jv := consumerEnv[n], jobEnv[n]
				if envDescribe(cv) != envDescribe(jv) {
					r.Errorf("%s and the consumer disagree on %s: %s and %s", name, n, envDescribe(jv), envDescribe(cv))
				}
			}
		}
	}
}

// envDescribe says what a variable is set to, for comparing two
// containers' settings.
func envDescribe(v envValue) string {
	switch {
	case v.value != nil:
		return strconv.Quote(*v.value)
	case v.secret != nil:
		return "Secret " + v.secret.Name + " key " + v.secret.Key
	case v.source == "":
		return "unset"
	}
	return v.source
}

// checkSecretFiles checks the variables that name files (KAFKA_TLS_CA_FILE,
// CLICKHOUSE_PASSWORD_FILE, ...): each file must be in a volume the
// container mounts, from a Secret or ConfigMap key the build has, and a
// secret given as a file must not also be given as a value.
func checkSecretFiles(r reporter, cl *cluster) {
	r.Helper()
	pods := cl.pods()
	for _, podName := range sortedKeys(pods) {
		pod := pods[podName]
		for _, c := range pod.Containers {
			name := podName + " container " + c.Name
			env, _ := cl.env(c)
			for _, n := range sortedKeys(env) {
				if !strings.HasSuffix(n, "_FILE") {
					continue
				}
				if _, both := env[strings.TrimSuffix(n, "_FILE")]; both {
					r.Errorf("%s: both %s and %s are set; the service refuses to start", name, strings.TrimSuffix(n, "_FILE"), n)
				}
				v := env[n]
				if v.value == nil {
					r.Errorf("%s: %s must be a path in a ConfigMap or literal, not from %s", name, n, v.source)
					continue
				}
				if err := cl.providesFile(pod, c, *v.value); err != nil {
					r.Errorf("%s: %s=%s: %v", name, n, *v.value, err)
				}
			}
		}
	}
}

// providesFile reports why file would be missing in container c of pod.
func (cl *cluster) providesFile(pod *podSpec, c container, file string) error {
	for _, m := range c.VolumeMounts {
		dir := strings.TrimSuffix(m.MountPath, "/") + "/"
		if m.SubPath != "" || !strings.HasPrefix(file, dir) {
			continue
		}
		rel := strings.TrimPrefix(file, dir)
		i := slices.IndexFunc(pod.Volumes, func(v volume) bool { return v.Name == m.Name })
		if i < 0 {
			return fmt.Errorf("volume %s is mounted but not defined", m.Name)
		}
		var keys map[string]bool
		var items []volumeItem
		var what string
		switch v := pod.Volumes[i]; {
		case v.Secret != nil:
			what, items = "Secret "+v.Secret.SecretName, v.Secret.Items
			if values, ok := cl.secrets[v.Secret.SecretName]; ok {
				keys = map[string]bool{}
				for k := range values {
					keys[k] = true
				}
			} else if cl.deployable {
				return fmt.Errorf("%s is not in the build", what)
			}
		case v.ConfigMap != nil:
			what, items = "ConfigMap "+v.ConfigMap.Name, v.ConfigMap.Items
			cm, ok := cl.configMaps[v.ConfigMap.Name]
			if !ok {
				return fmt.Errorf("%s is not in the build", what)
			}
			keys = map[string]bool{}
			for k := range cm.Data {
				keys[k] = true
			}
		default:
			return fmt.Errorf("volume %s is neither a Secret nor a ConfigMap", m.Name)
		}
		key := rel
		if len(items) > 0 {
			j := slices.IndexFunc(items, func(it volumeItem) bool { return it.Path == rel })
			if j < 0 {
				return fmt.Errorf("volume %s (%s) projects no %s", m.Name, what, rel)
			}
			key = items[j].Key
		}
		if keys != nil && !keys[key] {
			return fmt.Errorf("%s has no key %s", what, key)
		}
		return nil
	}
	return fmt.Errorf("no volume mounted at its directory")
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}
