package apiserver

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
)

// eventsResources is the row of events.k8s.io/v1 Events.
func eventsResources() []resource {
	return []resource{
		{
			// events.k8s.io/v1 serves the same objects as core/v1 events, from the same
			// store; its internal type is core's Event (see scheme.go). Its field labels
			// (regarding.*, reportingController) are converted to core's (scheme.go).
			group: "events.k8s.io", version: "v1", kind: "Event", plural: "events", singular: "event", shortNames: []string{"ev"}, namespaced: true,
			newObj: func() runtime.Object { return &corev1.Event{} }, newList: func() runtime.Object { return &corev1.EventList{} },
			selectableFields: eventsV1SelectableFields(), fields: eventFields,
			columns: []metav1.TableColumnDefinition{
				col("Last Seen", "string", "Time since the event was last seen"), col("Type", "string", "Normal or Warning"),
				col("Reason", "string", "Why the event happened"), col("Object", "string", "The object it is about"),
				wide("Subobject", "string", "The part of the object"), wide("Source", "string", "Who reported it"),
				col("Message", "string", "What happened"), wide("First Seen", "string", "Time since the event was first seen"),
				wide("Count", "string", "How often it happened"), wide("Name", "string", "The name of the event"),
			},
			row:   eventRow,
			hooks: hooks{name: pathSegmentName},
		},
	}
}

// addEventConversions teaches the scheme to translate events.k8s.io/v1 Events to and from
// core/v1 Events, the form both APIs store.
func addEventConversions(s *runtime.Scheme) error {
	if err := s.AddConversionFunc((*eventsv1.Event)(nil), (*corev1.Event)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*eventsv1.Event), b.(*corev1.Event)
		*out = corev1.Event{
			TypeMeta: metav1.TypeMeta{}, ObjectMeta: in.ObjectMeta,
			InvolvedObject: in.Regarding, Reason: in.Reason, Message: in.Note, Type: in.Type,
			EventTime: in.EventTime, Action: in.Action, Related: in.Related,
			ReportingController: in.ReportingController, ReportingInstance: in.ReportingInstance,
			Source:         corev1.EventSource{Component: in.DeprecatedSource.Component, Host: in.DeprecatedSource.Host},
			FirstTimestamp: in.DeprecatedFirstTimestamp, LastTimestamp: in.DeprecatedLastTimestamp, Count: in.DeprecatedCount,
		}
		if in.Series != nil {
			out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*corev1.Event)(nil), (*eventsv1.Event)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*corev1.Event), b.(*eventsv1.Event)
		*out = eventsv1.Event{
			ObjectMeta: in.ObjectMeta, Regarding: in.InvolvedObject, Reason: in.Reason, Note: in.Message, Type: in.Type,
			EventTime: in.EventTime, Action: in.Action, Related: in.Related,
			ReportingController: in.ReportingController, ReportingInstance: in.ReportingInstance,
			DeprecatedSource:         corev1.EventSource{Component: in.Source.Component, Host: in.Source.Host},
			DeprecatedFirstTimestamp: in.FirstTimestamp, DeprecatedLastTimestamp: in.LastTimestamp, DeprecatedCount: in.Count,
		}
		if in.Series != nil {
			out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*eventsv1.EventList)(nil), (*corev1.EventList)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*eventsv1.EventList), b.(*corev1.EventList)
		out.ListMeta = in.ListMeta
		out.Items = make([]corev1.Event, len(in.Items))
		for i := range in.Items {
			if err := s.Convert(&in.Items[i], &out.Items[i], nil); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return s.AddConversionFunc((*corev1.EventList)(nil), (*eventsv1.EventList)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*corev1.EventList), b.(*eventsv1.EventList)
		out.ListMeta = in.ListMeta
		out.Items = make([]eventsv1.Event, len(in.Items))
		for i := range in.Items {
			if err := s.Convert(&in.Items[i], &out.Items[i], nil); err != nil {
				return err
			}
		}
		return nil
	})
}
