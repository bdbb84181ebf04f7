package kuberuntime

import "errors"

// Errors SyncPod returns (wrapped) when a container could not be started; their text is
// the Waiting reason the container's status shows.
var (
	ErrCrashLoopBackOff        = errors.New("CrashLoopBackOff")
	ErrImagePull               = errors.New("ErrImagePull")
	ErrImagePullBackOff        = errors.New("ImagePullBackOff")
	ErrImageNeverPull          = errors.New("ErrImageNeverPull")
	ErrInvalidImageName        = errors.New("InvalidImageName")
	ErrImageInspect            = errors.New("ImageInspectError")
	ErrCreateContainerConfig   = errors.New("CreateContainerConfigError")
	ErrCreateContainer         = errors.New("CreateContainerError")
	ErrRunContainer            = errors.New("RunContainerError")
	ErrCreatePodSandbox        = errors.New("CreatePodSandboxError")
	ErrKillContainer           = errors.New("KillContainerError")
	errPodSandboxStatusMissing = errors.New("pod sandbox status is missing")
)
