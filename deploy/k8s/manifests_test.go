package k8s_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/k8sbuild"
)

// The subset of the Kubernetes objects the checks read. Decoding ignores
// everything else, so a misspelt field shows up as a missing one.

type meta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type header struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   meta   `yaml:"metadata"`
}

type labelSelector struct {
	MatchLabels      map[string]string `yaml:"matchLabels"`
	MatchExpressions []yaml.Node       `yaml:"matchExpressions"`
}

// intOrString is a port given by number or by name.
type intOrString struct {
	num int
	str string
}

func (p *intOrString) UnmarshalYAML(n *yaml.Node) error {
	if n.Tag == "!!int" {
		return n.Decode(&p.num)
	}
	return n.Decode(&p.str)
}

func (p intOrString) String() string {
	if p.str != "" {
		return p.str
	}
	return strconv.Itoa(p.num)
}

type workload struct {
	header `yaml:",inline"`
	Spec   struct {
		Replicas *int          `yaml:"replicas"`
		Selector labelSelector `yaml:"selector"`
		Template struct {
			Metadata meta    `yaml:"metadata"`
			Spec     podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	AutomountServiceAccountToken  *bool  `yaml:"automountServiceAccountToken"`
	TerminationGracePeriodSeconds *int64 `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               *struct {
		RunAsNonRoot   *bool  `yaml:"runAsNonRoot"`
		RunAsUser      *int64 `yaml:"runAsUser"`
		SeccompProfile *struct {
			Type string `yaml:"type"`
		} `yaml:"seccompProfile"`
	} `yaml:"securityContext"`
	TopologySpreadConstraints []struct {
		TopologyKey   string        `yaml:"topologyKey"`
		LabelSelector labelSelector `yaml:"labelSelector"`
	} `yaml:"topologySpreadConstraints"`
	Affinity *struct {
		PodAntiAffinity *yaml.Node `yaml:"podAntiAffinity"`
	} `yaml:"affinity"`
	InitContainers []container `yaml:"initContainers"`
	Containers     []container `yaml:"containers"`
	RestartPolicy  string      `yaml:"restartPolicy"`
	Volumes        []volume    `yaml:"volumes"`
}

// volume is a pod volume; only Secret and ConfigMap sources are decoded.
type volume struct {
	Name   string `yaml:"name"`
	Secret *struct {
		SecretName string       `yaml:"secretName"`
		Items      []volumeItem `yaml:"items"`
	} `yaml:"secret"`
	ConfigMap *struct {
		Name  string       `yaml:"name"`
		Items []volumeItem `yaml:"items"`
	} `yaml:"configMap"`
}

type volumeItem struct {
	Key  string `yaml:"key"`
	Path string `yaml:"path"`
}

// job is a batch/v1 Job; its pod template decodes as a workload's.
type job struct {
	header `yaml:",inline"`
	Spec   struct {
		BackoffLimit            *int `yaml:"backoffLimit"`
		ActiveDeadlineSeconds   *int `yaml:"activeDeadlineSeconds"`
		TTLSecondsAfterFinished *int `yaml:"ttlSecondsAfterFinished"`
		Template                struct {
			Metadata meta    `yaml:"metadata"`
			Spec     podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env          []envVar `yaml:"env"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
	EnvFrom []struct {
		Prefix       string `yaml:"prefix"`
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	StartupProbe   *probe `yaml:"startupProbe"`
	Lifecycle      *struct {
		PreStop *struct {
			Sleep *struct {
				Seconds int64 `yaml:"seconds"`
			} `yaml:"sleep"`
			Exec *yaml.Node `yaml:"exec"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	SecurityContext *struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		Privileged               *bool `yaml:"privileged"`
		Capabilities             *struct {
			Drop []string `yaml:"drop"`
			Add  []string `yaml:"add"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
}

type keyRef struct {
	Name     string `yaml:"name"`
	Key      string `yaml:"key"`
	Optional bool   `yaml:"optional"`
}

type envVar struct {
	Name      string  `yaml:"name"`
	Value     *string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef     *keyRef    `yaml:"secretKeyRef"`
		ConfigMapKeyRef  *keyRef    `yaml:"configMapKeyRef"`
		FieldRef         *yaml.Node `yaml:"fieldRef"`
		ResourceFieldRef *struct {
			ContainerName string `yaml:"containerName"`
			Resource      string `yaml:"resource"`
		} `yaml:"resourceFieldRef"`
	} `yaml:"valueFrom"`
}

type probe struct {
	HTTPGet *struct {
		Path string      `yaml:"path"`
		Port intOrString `yaml:"port"`
	} `yaml:"httpGet"`
}

type service struct {
	header `yaml:",inline"`
	Spec   struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []servicePort     `yaml:"ports"`
	} `yaml:"spec"`
}

type servicePort struct {
	Name       string      `yaml:"name"`
	Port       int         `yaml:"port"`
	TargetPort intOrString `yaml:"targetPort"`
}

type hpa struct {
	header `yaml:",inline"`
	Spec   struct {
		ScaleTargetRef struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Name       string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicas *int `yaml:"minReplicas"`
		MaxReplicas int  `yaml:"maxReplicas"`
		Metrics     []struct {
			Type     string `yaml:"type"`
			Resource *struct {
				Name   string `yaml:"name"`
				Target struct {
					Type               string `yaml:"type"`
					AverageUtilization int    `yaml:"averageUtilization"`
				} `yaml:"target"`
			} `yaml:"resource"`
		} `yaml:"metrics"`
	} `yaml:"spec"`
}

type pdb struct {
	header `yaml:",inline"`
	Spec   struct {
		MinAvailable   *intOrString  `yaml:"minAvailable"`
		MaxUnavailable *intOrString  `yaml:"maxUnavailable"`
		Selector       labelSelector `yaml:"selector"`
	} `yaml:"spec"`
}

type serviceMonitor struct {
	header `yaml:",inline"`
	Spec   struct {
		Selector  labelSelector `yaml:"selector"`
		Endpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"endpoints"`
	} `yaml:"spec"`
}

type serviceBackend struct {
	Name string `yaml:"name"`
	Port struct {
		Name   string `yaml:"name"`
		Number int    `yaml:"number"`
	} `yaml:"port"`
}

type ingress struct {
	header `yaml:",inline"`
	Spec   struct {
		Rules []struct {
			Host string `yaml:"host"`
			HTTP struct {
				Paths []ingressPathEntry `yaml:"paths"`
			} `yaml:"http"`
		} `yaml:"rules"`
		TLS []ingressTLS `yaml:"tls"`
	} `yaml:"spec"`
}

type ingressPathEntry struct {
	Path     string `yaml:"path"`
	PathType string `yaml:"pathType"`
	Backend  struct {
		Service *serviceBackend `yaml:"service"`
	} `yaml:"backend"`
}

type ingressTLS struct {
	Hosts      []string `yaml:"hosts"`
	SecretName string   `yaml:"secretName"`
}

type configMap struct {
	header `yaml:",inline"`
	Data   map[string]string `yaml:"data"`
}

// secret's Data is base64, as kustomize writes it.
type secret struct {
	header     `yaml:",inline"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
}

type networkPolicy struct {
	header `yaml:",inline"`
	Spec   struct {
		PodSelector labelSelector `yaml:"podSelector"`
		PolicyTypes []string      `yaml:"policyTypes"`
		Ingress     []policyRule  `yaml:"ingress"`
	} `yaml:"spec"`
}

type policyRule struct {
	Ports []struct {
		Port *intOrString `yaml:"port"`
	} `yaml:"ports"`
}

// manifests is the output of one kustomize build.
type manifests struct {
	objects []*yaml.Node
	headers []header
}

// build runs kustomize in process on dir (relative to deploy/k8s). The tree
// is copied into memory first: a secrets.env next to a secrets.env.example
// is always the example, so a developer's real secrets are never read and
// overlays that generate the Secret build without one. edit, when not nil,
// may change each file on the way (its path is relative to deploy/k8s).
func build(t *testing.T, dir string, edit func(path string, b []byte) []byte) *manifests {
	t.Helper()
	res, err := k8sbuild.Build(".", dir, edit)
	if err != nil {
		t.Fatal(err)
	}
	m := &manifests{}
	for _, r := range res {
		var n yaml.Node
		if err := yaml.Unmarshal(r.YAML, &n); err != nil {
			t.Fatalf("decode %s: %v", r.ID, err)
		}
		var h header
		if err := n.Decode(&h); err != nil {
			t.Fatalf("decode %s: %v", r.ID, err)
		}
		m.objects = append(m.objects, &n)
		m.headers = append(m.headers, h)
	}
	return m
}

// decodeKind returns every object of the given kinds, decoded into T.
func decodeKind[T any](t *testing.T, m *manifests, kinds ...string) []T {
	t.Helper()
	var out []T
	for i, h := range m.headers {
		if !slices.Contains(kinds, h.Kind) {
			continue
		}
		var v T
		if err := m.objects[i].Decode(&v); err != nil {
			t.Fatalf("decode %s %s: %v", h.Kind, h.Metadata.Name, err)
		}
		out = append(out, v)
	}
	return out
}

// selects reports whether sel picks an object labelled labels. Only
// matchLabels is understood; anything else is reported, so that the checks
// never pass on a selector they cannot read.
func selects(sel labelSelector, labels map[string]string) (bool, error) {
	if len(sel.MatchExpressions) > 0 {
		return false, errors.New("matchExpressions is not understood by these checks")
	}
	if len(sel.MatchLabels) == 0 {
		return false, errors.New("empty selector")
	}
	for k, v := range sel.MatchLabels {
		if labels[k] != v {
			return false, nil
		}
	}
	return true, nil
}

// binary is what the checks know of one command the image runs.
type binary struct {
	// pkg is the command's package, relative to the module root.
	pkg string
	// help are the arguments, before -h, whose help lists its flags: the
	// global ones and a subcommand's.
	help [][]string
	// addrEnv names the variable holding the HTTP listen address.
	addrEnv string
}

// binaries maps a container's command line to its binary.
func binaries() map[string]binary {
	return map[string]binary{
		"/usr/local/bin/ingest":    {pkg: "./cmd/ingest", help: [][]string{nil}, addrEnv: "INGEST_ADDR"},
		"/usr/local/bin/consumer":  {pkg: "./cmd/consumer", help: [][]string{nil}, addrEnv: "CONSUMER_ADDR"},
		"/usr/local/bin/api serve": {pkg: "./cmd/api", help: [][]string{nil, {"serve"}}, addrEnv: "API_ADDR"},
	}
}

// envNames are the environment variables one binary reads.
type envNames struct {
	// read holds the variables its flags read.
	read map[string]bool
	// former maps deprecated former names, still read, to their
	// replacements.
	former map[string]string
}

// builtEnv builds every binary once and reads its variables from its
// help, so that the checks see what the binaries read wherever their
// flags are defined.
var builtEnv = sync.OnceValues(func() (map[string]envNames, error) {
	dir, err := os.MkdirTemp("", "cms-k8s-bin-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var pkgs []string
	for _, b := range binaries() {
		pkgs = append(pkgs, b.pkg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := childproc.GoBuild(ctx, dir, pkgs...); err != nil {
		return nil, err
	}
	all := map[string]envNames{}
	for cmd, b := range binaries() {
		names, err := readEnv(ctx, filepath.Join(dir, path.Base(b.pkg)), b.help)
		if err != nil {
			return nil, fmt.Errorf("variables read by %s: %w", cmd, err)
		}
		all[cmd] = names
	}
	return all, nil
})

// helpEnv matches how pkg/envflag names a flag's variable in its help,
// with the file variable of a secret ("(env NAME or NAME_FILE)") and the
// deprecated former names it still reads.
var helpEnv = regexp.MustCompile(`\(env ([A-Z][A-Z0-9_]*)(?: or ([A-Z][A-Z0-9_]*_FILE))?\)(?: \(formerly ([A-Z][A-Z0-9_]*(?:, [A-Z][A-Z0-9_]*)*), deprecated\))?`)

// readEnv runs bin with each argument list of help followed by -h and
// returns the variables the help names. A help that names none is an
// error, so that a change of the help's form cannot leave the checks with
// nothing to compare against.
func readEnv(ctx context.Context, bin string, help [][]string) (envNames, error) {
	names := envNames{read: map[string]bool{}, former: map[string]string{}}
	for _, args := range help {
		cmd := exec.CommandContext(ctx, bin, append(slices.Clone(args), "-h")...)
		cmd.Env = []string{} // defaults only: the help must not depend on this process
		// -h exits 0 or 1 by binary; the text is what counts.
		out, _ := cmd.CombinedOutput()
		found := helpEnv.FindAllStringSubmatch(string(out), -1)
		if len(found) == 0 {
			return names, fmt.Errorf("%s %s -h names no environment variable:\n%s", bin, strings.Join(args, " "), out)
		}
		for _, m := range found {
			names.read[m[1]] = true
			if m[2] != "" {
				names.read[m[2]] = true
			}
			if m[3] != "" {
				for _, old := range strings.Split(m[3], ", ") {
					names.former[old] = m[1]
				}
			}
		}
	}
	return names, nil
}

// parseQuantity reads a Kubernetes resource quantity ("250m", "1",
// "512Mi", "1G") as a number of base units.
func parseQuantity(s string) (float64, error) {
	suffixes := []struct {
		suffix string
		factor float64
	}{
		{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
		{"m", 1e-3}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18},
	}
	num, factor := s, 1.0
	for _, sf := range suffixes {
		if strings.HasSuffix(s, sf.suffix) {
			num, factor = strings.TrimSuffix(s, sf.suffix), sf.factor
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("quantity %q: not a non-negative number with a unit", s)
	}
	return v * factor, nil
}

// parseNginxSize reads an nginx size ("2m", "512k", "1048576") in bytes.
func parseNginxSize(s string) (int64, error) {
	num, factor := s, int64(1)
	switch {
	case strings.HasSuffix(strings.ToLower(s), "k"):
		num, factor = s[:len(s)-1], 1<<10
	case strings.HasSuffix(strings.ToLower(s), "m"):
		num, factor = s[:len(s)-1], 1<<20
	case strings.HasSuffix(strings.ToLower(s), "g"):
		num, factor = s[:len(s)-1], 1<<30
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("nginx size %q: not a non-negative integer with k, m or g", s)
	}
	return v * factor, nil
}

// kustomizationImage returns the reference kustomize gives image under the
// images entries of dir/kustomization.yaml, and whether an entry exists.
func kustomizationImage(dir, image string) (string, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return "", false, fmt.Errorf("read kustomization: %w", err)
	}
	var k struct {
		Images []struct {
			Name    string `yaml:"name"`
			NewName string `yaml:"newName"`
			NewTag  string `yaml:"newTag"`
			Digest  string `yaml:"digest"`
		} `yaml:"images"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return "", false, fmt.Errorf("decode %s/kustomization.yaml: %w", dir, err)
	}
	for _, im := range k.Images {
		if im.Name != image {
			continue
		}
		ref := image
		if im.NewName != "" {
			ref = im.NewName
		}
		if im.NewTag != "" {
			ref += ":" + im.NewTag
		}
		if im.Digest != "" {
			ref += "@" + im.Digest
		}
		return ref, true, nil
	}
	return image, false, nil
}

func ptr[T any](v T) *T { return &v }
