package controllermanager

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// controllerConfig is the client config of the controller running as service account
// kube-system/<sa>: cfg.ControllerConfig's, with the controller-manager's user agent
// and tuning, or restConfig itself when there is none.
func controllerConfig(cfg Config, restConfig *rest.Config, sa string) (*rest.Config, error) {
	if cfg.ControllerConfig == nil {
		return restConfig, nil
	}
	c, err := cfg.ControllerConfig(sa)
	if err != nil {
		return nil, fmt.Errorf("credentials of %s: %w", sa, err)
	}
	c = rest.CopyConfig(c)
	c.UserAgent = restConfig.UserAgent
	c.ContentType, c.AcceptContentTypes = restConfig.ContentType, restConfig.AcceptContentTypes
	c.QPS, c.Burst = restConfig.QPS, restConfig.Burst
	return c, nil
}

// clients are a clientset and a metadata client of rc.
func clients(rc *rest.Config) (kubernetes.Interface, metadata.Interface, error) {
	cl, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	md, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	return cl, md, nil
}
