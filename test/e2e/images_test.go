package e2e

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerfile is where the images are defined, one target per deployed binary.
const dockerfile = repoRoot + "/hack/docker/Dockerfile"

// instruction is one Dockerfile instruction: its upper-cased name and the rest of its line.
type instruction struct {
	name, args string
}

// stage is the instructions from one FROM to the next.
type stage struct {
	base, name   string
	instructions []instruction
}

// parseDockerfile reads a Dockerfile's stages as BuildKit would for these checks: comments and
// blank lines dropped, lines ending in a backslash joined, and a stage begun by each FROM.
func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []stage
	var line string
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		text := strings.TrimSpace(scanner.Text())
		if strings.HasPrefix(text, "#") || (text == "" && line == "") {
			continue
		}
		if cont, ok := strings.CutSuffix(text, `\`); ok {
			line += cont + " "
			continue
		}
		line += text
		name, args, _ := strings.Cut(line, " ")
		in := instruction{strings.ToUpper(name), strings.TrimSpace(args)}
		line = ""
		switch {
		case in.name == "FROM":
			fields := strings.Fields(in.args)
			s := stage{base: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				s.name = fields[2]
			}
			stages = append(stages, s)
		case len(stages) > 0:
			stages[len(stages)-1].instructions = append(stages[len(stages)-1].instructions, in)
		case in.name != "ARG":
			t.Fatalf("%s: %s before the first FROM", path, in.name)
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

// TestDockerfileBuildsStaticNonRootImages checks, without a Docker engine, that each deployed
// binary has a target built in another stage with cgo off, and run from a distroless or scratch
// base as a user that is not root.
func TestDockerfileBuildsStaticNonRootImages(t *testing.T) {
	stages := parseDockerfile(t, dockerfile)
	byName := map[string]stage{}
	for _, s := range stages {
		byName[s.name] = s
	}
	build, ok := byName["build"]
	if !ok {
		t.Fatalf("%s has no stage named build", dockerfile)
	}
	staticBuild := regexp.MustCompile(`CGO_ENABLED=0 .*go build`)
	if !slices.ContainsFunc(build.instructions, func(in instruction) bool { return in.name == "RUN" && staticBuild.MatchString(in.args) }) {
		t.Errorf("the build stage has no RUN CGO_ENABLED=0 ... go build")
	}
	for _, target := range []string{"manager", "gateway", "metrics-adapter"} {
		s, ok := byName[target]
		if !ok {
			t.Errorf("no target %s", target)
			continue
		}
		for _, problem := range imageProblems(s) {
			t.Errorf("target %s: %s", target, problem)
		}
	}
}

// imageProblems lists what keeps a final stage from being a small, non-root image of one binary.
func imageProblems(s stage) []string {
	var problems []string
	if !strings.HasPrefix(s.base, "gcr.io/distroless/static") && s.base != "scratch" {
		problems = append(problems, "base "+s.base+"; want gcr.io/distroless/static or scratch")
	}
	var user, entrypoint string
	copied := false
	for _, in := range s.instructions {
		switch in.name {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "COPY":
			copied = copied || strings.HasPrefix(in.args, "--from=build ")
		case "RUN":
			problems = append(problems, "RUN in the final stage: "+in.args)
		}
	}
	if name, _, _ := strings.Cut(user, ":"); name == "" || name == "root" || name == "0" {
		problems = append(problems, "USER "+user+"; want a user that is not root")
	}
	if !copied {
		problems = append(problems, "no COPY --from=build: not multi-stage")
	}
	if entrypoint == "" {
		problems = append(problems, "no ENTRYPOINT")
	}
	return problems
}

// TestDockerfileContextLeavesOutTheControlPlane checks that the build context, the repository,
// leaves out bin/, where the local control plane's binaries are.
func TestDockerfileContextLeavesOutTheControlPlane(t *testing.T) {
	data, err := os.ReadFile(dockerfile + ".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^/?bin/?$`).Match(data) {
		t.Errorf("%s.dockerignore does not leave out bin/", dockerfile)
	}
}
