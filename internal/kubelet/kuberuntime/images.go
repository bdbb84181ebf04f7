package kuberuntime

import (
	"context"
	"fmt"
	"time"

	"github.com/distribution/reference"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// applyDefaultImageTag adds :latest to an image without tag or digest before the image
// is looked up or pulled (the runtime qualifies short names itself).
func applyDefaultImageTag(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("couldn't parse image reference %q: %w", image, err)
	}
	_, tagged := named.(reference.Tagged)
	_, digested := named.(reference.Digested)
	if !tagged && !digested {
		return image + ":latest", nil
	}
	return image, nil
}

// pullPolicy is the pull policy of an image (a container's imagePullPolicy, an image
// volume's pullPolicy), defaulted like the API server's defaulting when empty (Always
// for :latest or untagged images, else IfNotPresent).
func pullPolicy(image string, policy corev1.PullPolicy) corev1.PullPolicy {
	if policy != "" {
		return policy
	}
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return corev1.PullIfNotPresent
	}
	if t, ok := named.(reference.Tagged); (ok && t.Tag() == "latest") || (!ok && !isDigested(named)) {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

func isDigested(n reference.Named) bool { _, ok := n.(reference.Digested); return ok }

// shouldPull says whether an image is pulled, given the policy and whether it is present.
func shouldPull(policy corev1.PullPolicy, present bool) bool {
	switch policy {
	case corev1.PullNever:
		return false
	case corev1.PullAlways:
		return true
	}
	return !present
}

// imageResult is the outcome of ensureImage when the image is not available: the reason
// and message the container's Waiting state shows, and the error SyncPod returns.
type imageResult struct {
	reason, message string
	err             error
}

// imageRequest is an image the pod needs: a container's image, or an image volume's
// (container "": its events are the pod's).
type imageRequest struct {
	container, image string
	policy           corev1.PullPolicy
}

// containerImage is the image request of container c.
func containerImage(c *corev1.Container) imageRequest {
	return imageRequest{container: c.Name, image: c.Image, policy: c.ImagePullPolicy}
}

// ensureImage makes the requested image present (pulling it as the pull policy says,
// with a back-off per pod and image after failures) and returns the image reference to
// create the container from (the image id).
func (r *Runtime) ensureImage(ctx context.Context, pod *corev1.Pod, req imageRequest, sbConfig *runtimeapi.PodSandboxConfig) (string, *imageResult) {
	image, err := applyDefaultImageTag(req.image)
	if err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: %v", req.image, err)
		r.event(pod, req.container, corev1.EventTypeWarning, eventInspectFailed, "%s", msg)
		return "", &imageResult{reason: ErrInvalidImageName.Error(), message: msg, err: ErrInvalidImageName}
	}
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: req.image, Annotations: pod.Annotations}
	st, err := r.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec})
	if err != nil {
		msg := fmt.Sprintf("Failed to inspect image %q: %v", req.image, err)
		r.event(pod, req.container, corev1.EventTypeWarning, eventInspectFailed, "%s", msg)
		return "", &imageResult{reason: ErrImageInspect.Error(), message: msg, err: ErrImageInspect}
	}
	ref := st.GetImage().GetId()
	if !shouldPull(pullPolicy(req.image, req.policy), ref != "") {
		if ref != "" {
			r.event(pod, req.container, corev1.EventTypeNormal, eventPulled, "Container image %q already present on machine", req.image)
			return ref, nil
		}
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", req.image)
		r.event(pod, req.container, corev1.EventTypeWarning, eventErrImageNeverPull, "%s", msg)
		return "", &imageResult{reason: ErrImageNeverPull.Error(), message: msg, err: ErrImageNeverPull}
	}
	key := string(pod.UID) + "/image/" + req.image
	if waiting, lastErr := r.pullBackOff.inBackOffSinceUpdate(key); waiting {
		r.event(pod, req.container, corev1.EventTypeNormal, eventBackOff, "Back-off pulling image %q", req.image)
		msg := fmt.Sprintf("Back-off pulling image %q", req.image)
		if lastErr != "" {
			msg += ": " + lastErr
		}
		return "", &imageResult{reason: ErrImagePullBackOff.Error(), message: msg, err: ErrImagePullBackOff}
	}
	creds, err := r.pullCredentials(pod, image)
	if err != nil {
		msg := err.Error()
		r.event(pod, req.container, corev1.EventTypeWarning, eventFailed, "Failed to pull image %q: %s", req.image, msg)
		r.pullBackOff.next(key, r.cfg.Clock.Now(), ErrImagePull.Error()+": "+msg)
		return "", &imageResult{reason: ErrImagePull.Error(), message: msg, err: ErrImagePull}
	}
	r.event(pod, req.container, corev1.EventTypeNormal, eventPulling, "Pulling image %q", req.image)
	start := r.cfg.Clock.Now()
	ref, err = r.pull(ctx, spec, sbConfig, creds)
	if err != nil {
		msg := err.Error()
		if r.cfg.OfflineImages {
			msg += "; " + offlinePullHint(err)
		}
		r.event(pod, req.container, corev1.EventTypeWarning, eventFailed, "Failed to pull image %q: %s", req.image, msg)
		r.pullBackOff.next(key, r.cfg.Clock.Now(), ErrImagePull.Error()+": "+msg)
		return "", &imageResult{reason: ErrImagePull.Error(), message: msg, err: ErrImagePull}
	}
	r.pullBackOff.reset(key)
	took := r.cfg.Clock.Since(start).Round(time.Millisecond)
	size := ""
	if st, err := r.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec}); err == nil && st.GetImage() != nil {
		size = fmt.Sprintf(" Image size: %d bytes.", st.GetImage().GetSize())
	}
	r.event(pod, req.container, corev1.EventTypeNormal, eventPulled, "Successfully pulled image %q in %v (%v including waiting).%s", req.image, took, took, size)
	return ref, nil
}

// offlinePullHint ends the message of a failed pull (err) on a node whose images come
// only from kubelab's registry.
func offlinePullHint(err error) string {
	hint := "kubelab runs offline (kubelab up --offline): images come only from kubelab's registry"
	if status.Code(err) == codes.NotFound {
		hint += ", which does not have this one (add it with kubelab image import)"
	}
	return hint
}

// pull pulls the image with each of creds in turn until one succeeds, as upstream's
// kubelet does; without creds, anonymously. The error of several attempts lists them all.
func (r *Runtime) pull(ctx context.Context, spec *runtimeapi.ImageSpec, sbConfig *runtimeapi.PodSandboxConfig, creds []*runtimeapi.AuthConfig) (string, error) {
	if len(creds) == 0 {
		resp, err := r.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec, SandboxConfig: sbConfig})
		return resp.GetImageRef(), err
	}
	var errs []error
	for _, auth := range creds {
		resp, err := r.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec, Auth: auth, SandboxConfig: sbConfig})
		if err == nil {
			return resp.GetImageRef(), nil
		}
		errs = append(errs, err)
	}
	return "", utilerrors.NewAggregate(errs)
}

// grpcMessage is an error's gRPC status message (its text when it has no status).
func grpcMessage(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}
