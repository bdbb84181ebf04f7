package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/podidentitywebhook"
)

// IAM Roles for Service Accounts, the cluster's side: the pod identity webhook runs with
// the control plane, as on EKS, on the machine's loopback (the API server calls it there,
// by URL) with a serving certificate of the cluster CA, and the
// MutatingWebhookConfiguration pod-identity-webhook sends it every pod created. The
// tokens it has projected are the API server's, whose issuer (the API server's URL)
// serves its discovery document to anonymous readers (issuerDiscoveryBinding); the
// cloud's STS, at the VPC endpoint (ec2Names), trades them for a role's credentials,
// checking them with the keys it reads there, on the VPC and trusting the cluster CA
// (New).

// podIdentityWebhookAddr is where the webhook listens: loopback, a port the system picks.
const podIdentityWebhookAddr = "127.0.0.1:0"

// startPodIdentityWebhook opens the webhook's listener, points the
// MutatingWebhookConfiguration at it (made, or updated from an earlier run's port) and
// starts the webhook as the unit pod-identity-webhook, which serves on that listener (a
// restart of the unit listens on the same address again).
func (c *Cluster) startPodIdentityWebhook(ctx context.Context, admin kubernetes.Interface, start func(string, func(context.Context) error) *unit) error {
	pki := c.cp.APIServer.PKI()
	cert, key, err := pki.IssueServingCert(filepath.Join(c.cfg.DataDir, "pki", "pod-identity-webhook"), "pod-identity-webhook", []string{"127.0.0.1"})
	if err != nil {
		return fmt.Errorf("pod identity webhook: %w", err)
	}
	caPEM, err := os.ReadFile(pki.CACert())
	if err != nil {
		return fmt.Errorf("pod identity webhook: %w", err)
	}
	l, err := net.Listen("tcp", podIdentityWebhookAddr)
	if err != nil {
		return fmt.Errorf("pod identity webhook: %w", err)
	}
	addr := l.Addr().String()
	if err := ensureWebhookConfiguration(ctx, admin, podidentitywebhook.Configuration(addr, caPEM)); err != nil {
		l.Close()
		return err
	}
	first := l
	start("pod-identity-webhook", func(ctx context.Context) error {
		l := first
		first = nil // the unit's runs follow one another
		if l == nil {
			var err error
			if l, err = net.Listen("tcp", addr); err != nil {
				return fmt.Errorf("pod identity webhook: %w", err)
			}
		}
		client, err := c.clientset("pod-identity-webhook", podIdentityIdentity)
		if err != nil {
			l.Close()
			return err
		}
		w, err := podidentitywebhook.New(podidentitywebhook.Config{CertFile: cert, KeyFile: key,
			Settings: podidentitywebhook.Settings{Region: c.cfg.Region, RegionalSTS: true},
			Logger:   c.cfg.Logger.With("component", "pod-identity-webhook")}, client)
		if err != nil {
			l.Close()
			return err
		}
		return w.Serve(ctx, l)
	})
	return nil
}

// ensureWebhookConfiguration makes the MutatingWebhookConfiguration want, or brings an
// existing one's webhooks to want's.
func ensureWebhookConfiguration(ctx context.Context, client kubernetes.Interface, want *admissionregistrationv1.MutatingWebhookConfiguration) error {
	api := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if err := createAddon(ctx, "MutatingWebhookConfiguration "+want.Name, func(ctx context.Context) error {
		got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = api.Create(ctx, want, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		// Its webhooks as want has them (the port is this run's); an update that
		// changes nothing is not written.
		got.Webhooks = want.Webhooks
		_, err = api.Update(ctx, got, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}
