// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml" //nolint:depguard // k8s API types decode only via their JSON tags and unmarshalers (Quantity, IntOrString), which go.yaml.in/yaml ignores

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// The Kubernetes manifests in deploy/kubernetes/, checked offline: every
// manifest parses strictly into its Kubernetes API type, and the objects
// agree with each other (selectors, ports, probes, config mounts, secrets)
// and with the collector configs, which the pods' exact arguments and
// environment must validate with the built binary.

var updateK8sConfigMaps = flag.Bool("update-k8s-configmaps", false,
	"rewrite deploy/kubernetes/*-configmap.yaml from configs/ and deploy/kubernetes/config/")

const k8sDir = "deploy/kubernetes"

// k8sConfigMaps are the ConfigMaps that carry collector configs: file name,
// ConfigMap name, and its keys with the repository file each one copies.
var k8sConfigMaps = []struct {
	file, name string
	keys       [][2]string
}{
	{file: "agent-configmap.yaml", name: "otelcol-nemo-agent", keys: [][2]string{
		{"agent.yaml", "configs/agent.yaml"},
		{"agent-dns.yaml", k8sDir + "/config/agent-dns.yaml"},
	}},
	{file: "gateway-configmap.yaml", name: "otelcol-nemo-gateway", keys: [][2]string{
		{"gateway.yaml", "configs/gateway.yaml"},
	}},
}

// k8sObjects is every object of the manifests, by name.
type k8sObjects struct {
	files        []string
	namespaces   map[string]corev1.Namespace
	configMaps   map[string]corev1.ConfigMap
	secrets      map[string]corev1.Secret
	services     map[string]corev1.Service
	daemonSets   map[string]appsv1.DaemonSet
	statefulSets map[string]appsv1.StatefulSet
	pdbs         map[string]policyv1.PodDisruptionBudget
}

// workload is a DaemonSet or StatefulSet, seen through what both have.
type workload struct {
	kind, name, namespace string
	selector              *metav1.LabelSelector
	template              corev1.PodTemplateSpec
	claims                []string // a StatefulSet's volume claim templates
}

func (o k8sObjects) workloads() []workload {
	var out []workload
	for _, name := range slices.Sorted(maps.Keys(o.daemonSets)) {
		d := o.daemonSets[name]
		out = append(out, workload{"DaemonSet", d.Name, d.Namespace, d.Spec.Selector, d.Spec.Template, nil})
	}
	for _, name := range slices.Sorted(maps.Keys(o.statefulSets)) {
		d := o.statefulSets[name]
		var claims []string
		for i := range d.Spec.VolumeClaimTemplates {
			claims = append(claims, d.Spec.VolumeClaimTemplates[i].Name)
		}
		out = append(out, workload{"StatefulSet", d.Name, d.Namespace, d.Spec.Selector, d.Spec.Template, claims})
	}
	return out
}

// loadK8s parses every manifest of deploy/kubernetes/ (every *.yaml but
// kustomization.yaml), strictly: an unknown field is an error.
func loadK8s(t *testing.T) k8sObjects {
	t.Helper()
	o := k8sObjects{
		namespaces: map[string]corev1.Namespace{}, configMaps: map[string]corev1.ConfigMap{},
		secrets: map[string]corev1.Secret{}, services: map[string]corev1.Service{},
		daemonSets: map[string]appsv1.DaemonSet{}, statefulSets: map[string]appsv1.StatefulSet{},
		pdbs: map[string]policyv1.PodDisruptionBudget{},
	}
	paths, err := filepath.Glob(filepath.Join(testcollector.RepoRoot(t), k8sDir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in %s: %v", k8sDir, err)
	}
	for _, p := range paths {
		name := filepath.Base(p)
		if name == "kustomization.yaml" {
			continue
		}
		o.files = append(o.files, name)
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitYAMLDocuments(raw) {
			if err := o.add(doc); err != nil {
				t.Fatalf("%s (document %d): %v", name, i+1, err)
			}
		}
	}
	return o
}

// splitYAMLDocuments splits a multi-document YAML file on "---" lines and
// drops documents with nothing but comments.
func splitYAMLDocuments(raw []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		for line := range strings.SplitSeq(cur.String(), "\n") {
			if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
				docs = append(docs, slices.Clone(cur.Bytes()))
				break
			}
		}
		cur.Reset()
	}
	for _, line := range strings.SplitAfter(string(raw), "\n") {
		if strings.TrimRight(line, "\r\n") == "---" {
			flush()
			continue
		}
		cur.WriteString(line)
	}
	flush()
	return docs
}

func (o *k8sObjects) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	strict := func(v any) error { return yaml.UnmarshalStrict(doc, v) }
	switch gvk := tm.APIVersion + "/" + tm.Kind; gvk {
	case "v1/Namespace":
		var v corev1.Namespace
		if err := strict(&v); err != nil {
			return err
		}
		o.namespaces[v.Name] = v
	case "v1/ConfigMap":
		var v corev1.ConfigMap
		if err := strict(&v); err != nil {
			return err
		}
		o.configMaps[v.Name] = v
	case "v1/Secret":
		var v corev1.Secret
		if err := strict(&v); err != nil {
			return err
		}
		o.secrets[v.Name] = v
	case "v1/Service":
		var v corev1.Service
		if err := strict(&v); err != nil {
			return err
		}
		o.services[v.Name] = v
	case "apps/v1/DaemonSet":
		var v appsv1.DaemonSet
		if err := strict(&v); err != nil {
			return err
		}
		o.daemonSets[v.Name] = v
	case "apps/v1/StatefulSet":
		var v appsv1.StatefulSet
		if err := strict(&v); err != nil {
			return err
		}
		o.statefulSets[v.Name] = v
	case "policy/v1/PodDisruptionBudget":
		var v policyv1.PodDisruptionBudget
		if err := strict(&v); err != nil {
			return err
		}
		o.pdbs[v.Name] = v
	default:
		return fmt.Errorf("unexpected kind %q", gvk)
	}
	return nil
}

// configMapEntry is one key of a ConfigMap and the repository file it copies.
type configMapEntry struct{ key, source, content string }

// renderConfigMap writes a ConfigMap whose keys hold files verbatim, as YAML
// block scalars.
func renderConfigMap(name string, entries []configMapEntry) []byte {
	var b strings.Builder
	b.WriteString("# Generated from the files named below; do not edit. Regenerate with\n")
	b.WriteString("#   cd e2e && go test -run TestKubernetesConfigMapsHoldTheConfigs -update-k8s-configmaps\n")
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: otelcol-nemo\n", name)
	b.WriteString("  labels:\n    app.kubernetes.io/name: otelcol-nemo\n    app.kubernetes.io/part-of: otelcol-nemo\ndata:\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "  # %s\n  %s: |\n", e.source, e.key)
		for _, line := range strings.SplitAfter(e.content, "\n") {
			switch line {
			case "":
			case "\n":
				b.WriteString(line)
			default:
				b.WriteString("    " + line)
			}
		}
	}
	return []byte(b.String())
}

// TestKubernetesConfigMapsHoldTheConfigs: the ConfigMaps hold
// configs/agent.yaml, deploy/kubernetes/config/agent-dns.yaml and
// configs/gateway.yaml byte for byte, so the cluster runs what the e2e tests
// run. -update-k8s-configmaps rewrites them.
func TestKubernetesConfigMapsHoldTheConfigs(t *testing.T) {
	root := testcollector.RepoRoot(t)
	want := map[string][]configMapEntry{}
	for _, cm := range k8sConfigMaps {
		for _, kv := range cm.keys {
			raw, err := os.ReadFile(filepath.Join(root, kv[1]))
			if err != nil {
				t.Fatal(err)
			}
			want[cm.name] = append(want[cm.name], configMapEntry{key: kv[0], source: kv[1], content: string(raw)})
		}
		if *updateK8sConfigMaps {
			if err := os.WriteFile(filepath.Join(root, k8sDir, cm.file), renderConfigMap(cm.name, want[cm.name]), 0o644); err != nil { //nolint:gosec // G306: a manifest committed to the repository, readable like its other files
				t.Fatal(err)
			}
		}
	}
	o := loadK8s(t)
	for _, cm := range k8sConfigMaps {
		got, ok := o.configMaps[cm.name]
		if !ok {
			t.Errorf("ConfigMap %s is not in the manifests (%s)", cm.name, cm.file)
			continue
		}
		if len(got.Data) != len(cm.keys) || len(got.BinaryData) != 0 {
			t.Errorf("ConfigMap %s has keys %v, want %d", cm.name, slices.Sorted(maps.Keys(got.Data)), len(cm.keys))
		}
		for _, e := range want[cm.name] {
			if got.Data[e.key] != e.content {
				t.Errorf("ConfigMap %s key %s differs from %s: regenerate with (cd e2e && go test -run TestKubernetesConfigMapsHoldTheConfigs -update-k8s-configmaps)", cm.name, e.key, e.source)
			}
		}
	}
}

// k8sNamespace is the namespace of every object.
const k8sNamespace = "otelcol-nemo"

// TestKubernetesManifests checks that the objects agree with each other:
// kustomization lists every manifest; every object is in the namespace;
// selectors select their own pods and no others; Service ports lead to
// declared container ports; the agents' DNS name and port are the gateways'
// headless Service; probes hit the health_check port; every --config file is
// a key of a mounted ConfigMap; every Secret reference names an existing key;
// every container has CPU and memory requests and limits.
func TestKubernetesManifests(t *testing.T) {
	o := loadK8s(t)

	var kust struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Namespace  string   `json:"namespace"`
		Resources  []string `json:"resources"`
	}
	raw, err := os.ReadFile(filepath.Join(testcollector.RepoRoot(t), k8sDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, &kust); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if kust.Kind != "Kustomization" || kust.Namespace != k8sNamespace {
		t.Errorf("kustomization.yaml: kind %q namespace %q", kust.Kind, kust.Namespace)
	}
	if got, want := slices.Sorted(slices.Values(kust.Resources)), slices.Sorted(slices.Values(o.files)); !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml resources %v, want every manifest %v", got, want)
	}

	if _, ok := o.namespaces[k8sNamespace]; !ok || len(o.namespaces) != 1 {
		t.Errorf("namespaces %v, want exactly %s", slices.Collect(maps.Keys(o.namespaces)), k8sNamespace)
	}
	namespaced := map[string]string{}
	for n, v := range o.configMaps {
		namespaced["ConfigMap/"+n] = v.Namespace
	}
	for n, v := range o.secrets {
		namespaced["Secret/"+n] = v.Namespace
	}
	for n, v := range o.services {
		namespaced["Service/"+n] = v.Namespace
	}
	for n, v := range o.pdbs {
		namespaced["PodDisruptionBudget/"+n] = v.Namespace
	}
	for _, w := range o.workloads() {
		namespaced[w.kind+"/"+w.name] = w.namespace
	}
	for obj, ns := range namespaced {
		if ns != k8sNamespace {
			t.Errorf("%s is in namespace %q, want %s", obj, ns, k8sNamespace)
		}
	}

	workloads := o.workloads()
	byComponent := map[string]workload{}
	for _, w := range workloads {
		sel, err := metav1.LabelSelectorAsSelector(w.selector)
		if err != nil || sel.Empty() {
			t.Errorf("%s %s: selector %v: %v", w.kind, w.name, w.selector, err)
			continue
		}
		if !sel.Matches(labels.Set(w.template.Labels)) {
			t.Errorf("%s %s: selector %s does not match its pod labels %v", w.kind, w.name, sel, w.template.Labels)
		}
		for _, other := range workloads {
			if other.name != w.name && sel.Matches(labels.Set(other.template.Labels)) {
				t.Errorf("%s %s: selector %s also matches %s %s's pods", w.kind, w.name, sel, other.kind, other.name)
			}
		}
		byComponent[w.template.Labels["app.kubernetes.io/component"]] = w
		checkPodSpec(t, o, w)
	}
	agent, okAgent := byComponent["agent"]
	gw, okGateway := byComponent["gateway"]
	if !okAgent || !okGateway || agent.kind != "DaemonSet" || gw.kind != "StatefulSet" {
		t.Fatalf("want an agent DaemonSet and a gateway StatefulSet, have %v", slices.Collect(maps.Keys(byComponent)))
	}
	// The gateways' /data is a volume claim of each pod (what they
	// acknowledged outlives the pod), at least one run's rotation cap.
	for _, sts := range o.statefulSets {
		var claimed bool
		for _, c := range sts.Spec.VolumeClaimTemplates {
			if c.Name == "data" && c.Spec.Resources.Requests.Storage().Cmp(resource.MustParse("30Gi")) >= 0 {
				claimed = true
			}
		}
		if !claimed || sts.Spec.ServiceName == "" {
			t.Errorf("StatefulSet %s: want a data volume claim of at least 30Gi (one run's rotation cap) and its headless serviceName", sts.Name)
		}
	}

	// Every Service selects the pods of exactly one workload, on ports they declare.
	selected := map[string]string{}
	for name, svc := range o.services {
		var hits []workload
		for _, w := range workloads {
			if len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.template.Labels)) {
				hits = append(hits, w)
			}
		}
		if len(hits) != 1 {
			t.Errorf("Service %s selects %d workloads, want 1", name, len(hits))
			continue
		}
		selected[name] = hits[0].name
		for _, sp := range svc.Spec.Ports {
			cp, ok := containerPort(hits[0].template.Spec.Containers[0], sp.TargetPort.String())
			if !ok {
				t.Errorf("Service %s port %s: target %s is not a port of %s", name, sp.Name, sp.TargetPort.String(), hits[0].name)
				continue
			}
			if cp.ContainerPort != sp.Port || cp.Name != sp.Name || cp.Protocol != sp.Protocol {
				t.Errorf("Service %s port %s (%d/%s) leads to container port %s (%d/%s): keep name, number and protocol the same",
					name, sp.Name, sp.Port, sp.Protocol, cp.Name, cp.ContainerPort, cp.Protocol)
			}
		}
	}

	// The agents resolve the gateways' headless Service, on its OTLP/gRPC port.
	var headless *corev1.Service
	for name, svc := range o.services {
		if selected[name] == gw.name {
			headless = &svc
		}
	}
	if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone || headless.Spec.PublishNotReadyAddresses {
		t.Fatalf("the gateways need a headless Service (clusterIP: None) that leaves not-ready pods out: %+v", headless)
	}
	agentEnv := plainEnv(agent.template.Spec.Containers[0])
	if want := headless.Name + "." + headless.Namespace + ".svc.cluster.local"; agentEnv["GATEWAY_DNS_NAME"] != want {
		t.Errorf("agent GATEWAY_DNS_NAME = %q, want the headless Service %q", agentEnv["GATEWAY_DNS_NAME"], want)
	}
	gwPort := fmt.Sprint(envPort(plainEnv(gw.template.Spec.Containers[0]), "OTLP_GRPC_PORT", 4317))
	var svcPort string
	for _, sp := range headless.Spec.Ports {
		if sp.Name == "otlp-grpc" {
			svcPort = fmt.Sprint(sp.Port)
		}
	}
	if agentEnv["GATEWAY_OTLP_PORT"] != gwPort || svcPort != gwPort {
		t.Errorf("agent GATEWAY_OTLP_PORT %q, headless Service otlp-grpc port %q, gateway OTLP_GRPC_PORT %s: must agree", agentEnv["GATEWAY_OTLP_PORT"], svcPort, gwPort)
	}
	if !slices.Contains(agent.template.Spec.Containers[0].Args, "--config=/etc/otelcol-nemo/agent-dns.yaml") {
		t.Errorf("the agent does not merge the dns overlay: args %v", agent.template.Spec.Containers[0].Args)
	}

	for name, pdb := range o.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(gw.template.Labels)) || sel.Matches(labels.Set(agent.template.Labels)) {
			t.Errorf("PodDisruptionBudget %s: selector %v must select the gateways only (%v)", name, pdb.Spec.Selector, err)
		}
	}
}
