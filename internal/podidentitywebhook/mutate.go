package podidentitywebhook

import (
	"encoding/csv"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The annotations, with the EKS webhook's names: on a ServiceAccount, the role its pods
// are, the audience of their token, whether they use STS's regional endpoint and the
// token's lifetime; on a pod, its own token lifetime and containers left alone (a
// comma-separated list).
const (
	AnnotationDomain          = "eks.amazonaws.com"
	RoleARNAnnotation         = AnnotationDomain + "/role-arn"
	AudienceAnnotation        = AnnotationDomain + "/audience"
	RegionalSTSAnnotation     = AnnotationDomain + "/sts-regional-endpoints"
	TokenExpirationAnnotation = AnnotationDomain + "/token-expiration"
	SkipContainersAnnotation  = AnnotationDomain + "/skip-containers"
)

// What a mutated pod gets: the projected token volume aws-iam-token, mounted read-only
// in each container at MountPath, whose file token AWS_WEB_IDENTITY_TOKEN_FILE names.
const (
	VolumeName = "aws-iam-token"
	MountPath  = "/var/run/secrets/eks.amazonaws.com/serviceaccount"
	TokenFile  = "token"

	// DefaultAudience is the token's audience unless the ServiceAccount names another.
	DefaultAudience = "sts.amazonaws.com"
	// DefaultTokenExpiration is the token's lifetime in seconds (24 hours, the most
	// EKS allows); MinTokenExpiration the least an annotation may ask (the API server's
	// floor is 10 minutes, the webhook's an hour).
	DefaultTokenExpiration = int64(86400)
	MinTokenExpiration     = int64(3600)
)

// The environment a mutated container gets.
const (
	EnvRoleARN              = "AWS_ROLE_ARN"
	EnvWebIdentityToken     = "AWS_WEB_IDENTITY_TOKEN_FILE"
	EnvRegion               = "AWS_REGION"
	EnvDefaultRegion        = "AWS_DEFAULT_REGION"
	EnvSTSRegionalEndpoints = "AWS_STS_REGIONAL_ENDPOINTS"
)

// Settings are the webhook's own defaults, which a ServiceAccount's annotations
// override.
type Settings struct {
	// Region is AWS_REGION and AWS_DEFAULT_REGION; none are set when empty.
	Region string
	// Audience of the tokens (DefaultAudience when empty).
	Audience string
	// RegionalSTS sets AWS_STS_REGIONAL_ENDPOINTS=regional (EKS runs the webhook so).
	RegionalSTS bool
	// TokenExpiration in seconds (DefaultTokenExpiration when 0).
	TokenExpiration int64
}

// Identity is what a ServiceAccount's annotations ask for its pods.
type Identity struct {
	RoleARN         string
	Audience        string
	RegionalSTS     bool
	TokenExpiration int64
}

// IdentityOf is the identity sa's pods get, and false when sa names no role (its pods
// stay as they are). An annotation that does not parse keeps the default, as the EKS
// webhook does; a lifetime under MinTokenExpiration is raised to it.
func IdentityOf(sa *corev1.ServiceAccount, s Settings) (Identity, bool) {
	if sa == nil || sa.Annotations[RoleARNAnnotation] == "" {
		return Identity{}, false
	}
	id := Identity{RoleARN: sa.Annotations[RoleARNAnnotation], Audience: s.Audience,
		RegionalSTS: s.RegionalSTS, TokenExpiration: s.TokenExpiration}
	if id.Audience == "" {
		id.Audience = DefaultAudience
	}
	if id.TokenExpiration == 0 {
		id.TokenExpiration = DefaultTokenExpiration
	}
	if aud, ok := sa.Annotations[AudienceAnnotation]; ok {
		id.Audience = aud
	}
	if v, ok := sa.Annotations[RegionalSTSAnnotation]; ok {
		if b, err := strconv.ParseBool(v); err == nil {
			id.RegionalSTS = b
		}
	}
	id.TokenExpiration = expiration(sa.Annotations, id.TokenExpiration)
	return id, true
}

// expiration is the token-expiration annotation of annotations, at least
// MinTokenExpiration; def when absent or not a number.
func expiration(annotations map[string]string, def int64) int64 {
	v, ok := annotations[TokenExpirationAnnotation]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return def
	}
	return max(n, MinTokenExpiration)
}

// PatchOperation is one JSON Patch (RFC 6902) operation.
type PatchOperation struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Mutate is the JSON Patch that gives pod the identity id, in the EKS webhook's shape:
// the token volume added first among the volumes (unless the pod has one of that name),
// and the containers and init containers replaced by themselves with the environment
// and the mount each lacks. A container keeps whatever of the environment it sets
// itself: AWS_ROLE_ARN or AWS_WEB_IDENTITY_TOKEN_FILE, either region variable, or
// AWS_STS_REGIONAL_ENDPOINTS keeps that group as it is. Containers the pod's
// skip-containers annotation names are left alone; the pod's token-expiration
// annotation overrides the ServiceAccount's. changed says whether the patch changes
// anything.
func Mutate(pod *corev1.Pod, id Identity, region string) (patch []PatchOperation, changed bool) {
	lifetime := expiration(pod.Annotations, id.TokenExpiration)
	skip := containersToSkip(pod.Annotations[SkipContainersAnnotation])
	tokenPath := path.Join(MountPath, TokenFile)
	if os := pod.Spec.NodeSelector[corev1.LabelOSStable]; os == "windows" || pod.Spec.NodeSelector["beta.kubernetes.io/os"] == "windows" {
		tokenPath = `C:` + strings.ReplaceAll(tokenPath, "/", `\`)
	}
	mutateAll := func(in []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, 0, len(in))
		for _, c := range in {
			c = *c.DeepCopy()
			if !skip[c.Name] && addToContainer(&c, id, region, tokenPath) {
				changed = true
			}
			out = append(out, c)
		}
		return out
	}
	initContainers := mutateAll(pod.Spec.InitContainers)
	containers := mutateAll(pod.Spec.Containers)

	hasVolume := false
	for _, v := range pod.Spec.Volumes {
		hasVolume = hasVolume || v.Name == VolumeName
	}
	if !hasVolume {
		vol := corev1.Volume{Name: VolumeName, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: id.Audience, ExpirationSeconds: &lifetime, Path: TokenFile}}}}}}
		if pod.Spec.Volumes == nil {
			patch = append(patch, PatchOperation{Op: "add", Path: "/spec/volumes", Value: []corev1.Volume{vol}})
		} else {
			patch = append(patch, PatchOperation{Op: "add", Path: "/spec/volumes/0", Value: vol})
		}
		changed = true
	}
	patch = append(patch, PatchOperation{Op: "add", Path: "/spec/containers", Value: containers})
	if len(initContainers) > 0 {
		patch = append(patch, PatchOperation{Op: "add", Path: "/spec/initContainers", Value: initContainers})
	}
	return patch, changed
}

// addToContainer adds to c what of the identity's environment and the token's mount it
// lacks, and says whether it added anything. A container that sets a variable of
// each group itself is left alone.
func addToContainer(c *corev1.Container, id Identity, region, tokenPath string) bool {
	var hasIdentity, hasRegion, hasSTS bool
	for _, e := range c.Env {
		switch e.Name {
		case EnvRoleARN, EnvWebIdentityToken:
			hasIdentity = true
		case EnvRegion, EnvDefaultRegion:
			hasRegion = true
		case EnvSTSRegionalEndpoints:
			hasSTS = true
		}
	}
	if hasIdentity && hasRegion && hasSTS {
		return false // it has set all of it itself: not even the mount is added
	}
	changed := false
	if !hasSTS && id.RegionalSTS {
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvSTSRegionalEndpoints, Value: "regional"})
		changed = true
	}
	if !hasRegion && region != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvDefaultRegion, Value: region}, corev1.EnvVar{Name: EnvRegion, Value: region})
		changed = true
	}
	if !hasIdentity {
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvRoleARN, Value: id.RoleARN}, corev1.EnvVar{Name: EnvWebIdentityToken, Value: tokenPath})
		changed = true
	}
	for _, m := range c.VolumeMounts {
		if m.Name == VolumeName {
			return changed
		}
	}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VolumeName, ReadOnly: true, MountPath: MountPath})
	return true
}

// containersToSkip parses the skip-containers annotation, a CSV record of names;
// nothing is skipped when it does not parse.
func containersToSkip(v string) map[string]bool {
	skip := map[string]bool{}
	if v == "" {
		return skip
	}
	names, err := csv.NewReader(strings.NewReader(v)).Read()
	if err != nil {
		return skip
	}
	for _, n := range names {
		skip[n] = true
	}
	return skip
}
