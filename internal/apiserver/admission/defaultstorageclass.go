package admission

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/kubelab/kubelab/internal/storageclass"
)

// defaultStorageClass is the admission step upstream calls DefaultStorageClass: a claim
// created without storageClassName gets the default class (storageclass.Default), so
// that it binds the way its class says from the start. An explicit "" asks for no class
// and is left alone; with no default class the claim stays without one.
type defaultStorageClass struct {
	*admission.Handler
	classes storagelisters.StorageClassLister
}

var _ admission.MutationInterface = (*defaultStorageClass)(nil)

func newDefaultStorageClass(factory informers.SharedInformerFactory) *defaultStorageClass {
	inf := factory.Storage().V1().StorageClasses()
	p := &defaultStorageClass{Handler: admission.NewHandler(admission.Create), classes: inf.Lister()}
	p.SetReadyFunc(inf.Informer().HasSynced)
	return p
}

func (p *defaultStorageClass) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("persistentvolumeclaims") || a.GetSubresource() != "" {
		return nil
	}
	pvc, ok := a.GetObject().(*corev1.PersistentVolumeClaim)
	if !ok || storagehelpers.PersistentVolumeClaimHasClass(pvc) {
		return nil
	}
	if !p.WaitForReady() {
		return admission.NewForbidden(a, errors.New("not yet ready to handle request"))
	}
	classes, err := p.classes.List(labels.Everything())
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("list storage classes: %w", err))
	}
	if def := storageclass.Default(classes); def != nil {
		pvc.Spec.StorageClassName = &def.Name
	}
	return nil
}
