package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// kubernetesObjects decodes every document of deploy/kubernetes/payintake.yaml
// strictly into the official Kubernetes API types: a misspelt or misplaced
// field, which kubectl would drop with only a warning, fails here.
func kubernetesObjects(t *testing.T) (deps []appsv1.Deployment, svcs []corev1.Service, pdbs []policyv1.PodDisruptionBudget) {
	t.Helper()
	data, err := os.ReadFile("../../deploy/kubernetes/payintake.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for i, doc := range strings.Split(string(data), "\n---\n") {
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("document %d: %v", i+1, err)
		}
		var target any
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 Deployment":
			deps = append(deps, appsv1.Deployment{})
			target = &deps[len(deps)-1]
		case "v1 Service":
			svcs = append(svcs, corev1.Service{})
			target = &svcs[len(svcs)-1]
		case "policy/v1 PodDisruptionBudget":
			pdbs = append(pdbs, policyv1.PodDisruptionBudget{})
			target = &pdbs[len(pdbs)-1]
		default:
			t.Fatalf("document %d: %q %q is not a kind this test checks: add it", i+1, head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), target); err != nil {
			t.Fatalf("document %d (%s): %v", i+1, head.Kind, err)
		}
	}
	return deps, svcs, pdbs
}

// TestKubernetesManifest: the shipped manifest decodes strictly, runs serve
// with flags serve has, shares the database URL and secret key from one
// Secret, gives a pod time to drain, and its Services and disruption budget
// select the Deployment's pods on ports its container exposes.
func TestKubernetesManifest(t *testing.T) {
	deps, svcs, pdbs := kubernetesObjects(t)
	if len(deps) != 1 || len(svcs) != 2 || len(pdbs) != 1 {
		t.Fatalf("want 1 Deployment, 2 Services, 1 PodDisruptionBudget; have %d, %d, %d", len(deps), len(svcs), len(pdbs))
	}
	d := deps[0]
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Fatalf("replicas %v: a fleet has at least 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template
	for k, v := range d.Spec.Selector.MatchLabels {
		if pod.Labels[k] != v {
			t.Fatalf("the Deployment's selector %s=%s does not select its own pods (%v)", k, v, pod.Labels)
		}
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]

	// Every argument is a flag serve knows: with -h appended, serve prints
	// its help (exit 0) only when every flag before it parsed.
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("args %q: want serve first", c.Args)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append(append([]string{}, c.Args...), "-h"), &stdout, &stderr); code != 0 {
		t.Fatalf("payintake %s: exit %d: %s", strings.Join(c.Args, " "), code, stderr.String())
	}

	// The pod must outlive its drain: preStop, then --drain-timeout.
	drain := 60 * time.Second // serve's default
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--drain-timeout="); ok {
			var err error
			if drain, err = time.ParseDuration(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	var preStop time.Duration
	if h := c.Lifecycle; h != nil && h.PreStop != nil && h.PreStop.Sleep != nil {
		preStop = time.Duration(h.PreStop.Sleep.Seconds) * time.Second
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= drain+preStop {
		t.Fatalf("terminationGracePeriodSeconds %v must exceed preStop %v + drain %v, or pods are killed mid-upload", g, preStop, drain)
	}

	// Replicas share the database and the secret key from one Secret.
	secrets := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			secrets[e.Name] = e.ValueFrom.SecretKeyRef.Name
		}
	}
	for _, name := range []string{"PAYINTAKE_DATABASE_URL", secretKeyEnv} {
		if secrets[name] == "" {
			t.Errorf("%s is not read from a Secret (%v)", name, secrets)
		}
	}

	// Probes: ready means /readyz (503 while draining), alive /healthz.
	for what, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
			t.Errorf("%s probe %+v: want GET /readyz", what, p)
		}
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe %+v: want GET /healthz", p)
	}

	ports := map[string]bool{}
	for _, p := range c.Ports {
		ports[p.Name] = true
	}
	for _, s := range svcs {
		for k, v := range s.Spec.Selector {
			if pod.Labels[k] != v {
				t.Errorf("Service %s selects %s=%s, not the Deployment's pods", s.Name, k, v)
			}
		}
		for _, p := range s.Spec.Ports {
			if !ports[p.TargetPort.String()] {
				t.Errorf("Service %s targets port %q, which the container does not name (%v)", s.Name, p.TargetPort.String(), ports)
			}
		}
	}
	b := pdbs[0]
	for k, v := range b.Spec.Selector.MatchLabels {
		if pod.Labels[k] != v {
			t.Errorf("the PodDisruptionBudget selects %s=%s, not the Deployment's pods", k, v)
		}
	}
	if b.Spec.MinAvailable == nil || b.Spec.MinAvailable.IntValue() >= int(*d.Spec.Replicas) {
		t.Errorf("minAvailable %v of %d replicas: a node drain could never evict a pod", b.Spec.MinAvailable, *d.Spec.Replicas)
	}
}
