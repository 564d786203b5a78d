// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// checkPodSpec checks one workload's pod: ports, probes, config mounts,
// secrets, resources.
func checkPodSpec(t *testing.T, o k8sObjects, w workload) {
	t.Helper()
	spec := w.template.Spec
	if len(spec.Containers) != 1 {
		t.Errorf("%s: %d containers, want 1", w.name, len(spec.Containers))
		return
	}
	c := spec.Containers[0]
	env := plainEnv(c)
	if env["OTELCOL_LISTEN_HOST"] != "0.0.0.0" {
		t.Errorf("%s: OTELCOL_LISTEN_HOST = %q: the configs bind localhost by default, where neither the Service nor the probes reach", w.name, env["OTELCOL_LISTEN_HOST"])
	}
	for _, p := range []struct {
		env, name string
		def       int32
	}{{"OTLP_GRPC_PORT", "otlp-grpc", 4317}, {"OTLP_HTTP_PORT", "otlp-http", 4318}, {"HEALTH_CHECK_PORT", "health", 13133}, {"OTELCOL_METRICS_PORT", "metrics", 8888}} {
		want := envPort(env, p.env, p.def)
		if cp, ok := containerPort(c, p.name); !ok || cp.ContainerPort != want {
			t.Errorf("%s: container port %s = %+v, want %d (%s)", w.name, p.name, cp, want, p.env)
		}
	}
	health := envPort(env, "HEALTH_CHECK_PORT", 13133)
	for kind, probe := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			t.Errorf("%s: no %s httpGet probe", w.name, kind)
			continue
		}
		cp, ok := containerPort(c, probe.HTTPGet.Port.String())
		if !ok || cp.ContainerPort != health || probe.HTTPGet.Path != "/" {
			t.Errorf("%s: %s probe GET %s on port %s, want / on the health_check port %d", w.name, kind, probe.HTTPGet.Path, probe.HTTPGet.Port.String(), health)
		}
	}

	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	volumes := map[string]corev1.Volume{}
	for i := range spec.Volumes {
		volumes[spec.Volumes[i].Name] = spec.Volumes[i]
	}
	for _, claim := range w.claims {
		volumes[claim] = corev1.Volume{Name: claim} // a StatefulSet's volumeClaimTemplates
	}
	for _, m := range c.VolumeMounts {
		if _, ok := volumes[m.Name]; !ok {
			t.Errorf("%s: mount %s names no volume %q", w.name, m.MountPath, m.Name)
		}
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if v.ConfigMap == nil {
			continue
		}
		cm, ok := o.configMaps[v.ConfigMap.Name]
		if !ok {
			t.Errorf("%s: volume %s: ConfigMap %s is not in the manifests", w.name, v.Name, v.ConfigMap.Name)
			continue
		}
		for _, it := range v.ConfigMap.Items {
			if _, ok := cm.Data[it.Key]; !ok {
				t.Errorf("%s: volume %s: ConfigMap %s has no key %s", w.name, v.Name, cm.Name, it.Key)
			}
		}
	}
	configs := configArgs(c.Args)
	if len(configs) == 0 {
		t.Errorf("%s: no --config argument", w.name)
	}
	for _, path := range configs {
		if _, ok := configMapFile(o, spec, c, path); !ok {
			t.Errorf("%s: --config=%s is not a key of a ConfigMap mounted at %s", w.name, path, filepath.Dir(path))
		}
	}

	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		s, ok := o.secrets[ref.Name]
		_, inData := s.Data[ref.Key]
		_, inStringData := s.StringData[ref.Key]
		if !ok || (!inData && !inStringData) {
			t.Errorf("%s: %s from Secret %s key %s, which does not exist", w.name, e.Name, ref.Name, ref.Key)
		}
	}

	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okReq := c.Resources.Requests[res]
		lim, okLim := c.Resources.Limits[res]
		if !okReq || !okLim || req.Cmp(lim) > 0 || req.Sign() <= 0 {
			t.Errorf("%s: %s request %v and limit %v: both needed, request <= limit", w.name, res, quantity(req, okReq), quantity(lim, okLim))
		}
	}
	// GOMEMLIMIT from the memory limit (80-95% of it): without it the Go
	// heap outgrows the limit before memory_limiter refuses.
	if lim, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		goLimit, err := resource.ParseQuantity(strings.TrimSuffix(plainEnv(c)["GOMEMLIMIT"], "B"))
		if share := float64(goLimit.Value()) / float64(lim.Value()); err != nil || share < 0.8 || share > 0.95 {
			t.Errorf("%s: GOMEMLIMIT %q is not 80-95%% of the memory limit %v (err %v)", w.name, plainEnv(c)["GOMEMLIMIT"], lim.String(), err)
		}
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: want a read-only root filesystem and no privilege escalation", w.name)
	}
	if psc := spec.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: want runAsNonRoot", w.name)
	}
}

func quantity(q resource.Quantity, ok bool) string {
	if !ok {
		return "<unset>"
	}
	return q.String()
}

// containerPort finds a container port by name or number.
func containerPort(c corev1.Container, nameOrNumber string) (corev1.ContainerPort, bool) {
	for _, p := range c.Ports {
		if p.Name == nameOrNumber || fmt.Sprint(p.ContainerPort) == nameOrNumber {
			return p, true
		}
	}
	return corev1.ContainerPort{}, false
}

// plainEnv is a container's literal environment values.
func plainEnv(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	return env
}

// envPort is the port a config takes from the variable, with its default.
func envPort(env map[string]string, name string, def int32) int32 {
	v, ok := env[name]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return -1
	}
	return int32(n)
}

// configMapFile returns the content a container sees at path, when path is a
// file of a ConfigMap volume mounted in that container.
func configMapFile(o k8sObjects, spec corev1.PodSpec, c corev1.Container, path string) (string, bool) {
	for _, m := range c.VolumeMounts {
		rel, err := filepath.Rel(m.MountPath, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		for i := range spec.Volumes {
			v := &spec.Volumes[i]
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			cm := o.configMaps[v.ConfigMap.Name]
			key := rel
			if len(v.ConfigMap.Items) > 0 {
				key = ""
				for _, it := range v.ConfigMap.Items {
					if it.Path == rel {
						key = it.Key
					}
				}
			}
			data, ok := cm.Data[key]
			return data, ok
		}
	}
	return "", false
}

// TestKubernetesPodConfigsValidate runs `otelcol-nemo validate` with each
// pod's exact arguments, its environment (literal values and Secret keys) and
// the ConfigMap files it mounts: the configs the cluster would run start.
func TestKubernetesPodConfigsValidate(t *testing.T) {
	o := loadK8s(t)
	for _, w := range o.workloads() {
		t.Run(w.name, func(t *testing.T) {
			c := w.template.Spec.Containers[0]
			dir := t.TempDir()
			var args []string
			for _, a := range c.Args {
				path, ok := strings.CutPrefix(a, "--config=")
				if !ok {
					args = append(args, a)
					continue
				}
				data, ok := configMapFile(o, w.template.Spec, c, path)
				if !ok {
					t.Fatalf("--config=%s is not a mounted ConfigMap file", path)
				}
				local := filepath.Join(dir, filepath.Base(path))
				if err := os.WriteFile(local, []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config="+local)
			}
			env := plainEnv(c)
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					s := o.secrets[e.ValueFrom.SecretKeyRef.Name]
					env[e.Name] = s.StringData[e.ValueFrom.SecretKeyRef.Key]
					if b, ok := s.Data[e.ValueFrom.SecretKeyRef.Key]; ok {
						env[e.Name] = string(b)
					}
				}
			}
			out, err := testcollector.Run(t, env, append([]string{"validate"}, args...)...)
			if err != nil {
				t.Fatalf("validate %v with the pod's environment: %v\n%s", c.Args, err, out)
			}
		})
	}
}
