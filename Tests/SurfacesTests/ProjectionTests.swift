import RelayJSON
import Surfaces
import Testing

@Suite("Snapshot projections")
struct ProjectionTests {
    @Test("Live Activity content state: headline, subhead, progress, stage")
    func contentState() throws {
        let snapshot = try SnapshotFixtures.snapshot("queued")
        #expect(try snapshot.liveActivityContentState().encodedString()
            == #"{"headline":"Surface queued","subhead":"Use this as the initial state before a Live Activity starts changing.","progress":0,"stage":"prompted"}"#)
        #expect(try snapshot.liveActivityAttributes().encodedString() == #"{"surfaceId":"surface-queued","modeLabel":"queued"}"#)
    }

    @Test("alert payload from a Live Activity snapshot carries the surface_snapshot sidecar")
    func alert() throws {
        let snapshot = try SnapshotFixtures.snapshot("attention")
        #expect(try snapshot.alertPayload().encodedString()
            == #"{"aps":{"alert":{"title":"Attention needed","body":"Use this state for alert-worthy pushes or prominent ActivityKit updates."},"sound":"default"},"liveSurface":{"kind":"surface_snapshot","snapshotId":"fixture-attention","surfaceId":"surface-attention","state":"attention","deepLink":"mobilesurfaces://surface/surface-attention"}}"#)
    }

    @Test("notification payload: subtitle, category, thread-id and the surface_notification sidecar")
    func notification() throws {
        let snapshot = try SnapshotFixtures.snapshot("notification-subtitle")
        #expect(try snapshot.notificationPayload().encodedString()
            == #"{"aps":{"alert":{"title":"New comment on your draft","subtitle":"Project Atlas - design review","body":"Sam left a comment on \"Mobile Surfaces architecture review\"."},"sound":"default","category":"surface-update","thread-id":"project-atlas"},"liveSurface":{"kind":"surface_notification","snapshotId":"fixture-notification-subtitle","surfaceId":"surface-notification-subtitle","state":"active","deepLink":"mobilesurfaces://surface/surface-notification-subtitle"}}"#)
        let relevance = try SnapshotFixtures.snapshot("notification-relevance-summary").notificationPayload()
        #expect(relevance["aps"]?["relevance-score"] == 0.9)
    }

    @Test("interruption-level is written as Apple spells it", arguments: [
        ("timeSensitive", "time-sensitive"), ("passive", "passive"), ("active", "active"), ("critical", "critical"),
    ])
    func interruptionLevel(contract: String, wire: String) throws {
        var object = try SnapshotFixtures.snapshot("notification-alert").encodeJSON().objectValue!
        var slice = object["notification"]!.objectValue!
        slice["interruptionLevel"] = .string(contract)
        slice["targetContentId"] = "window-2"
        object["notification"] = .object(slice)
        let aps = try LiveSurfaceSnapshot(json: .object(object)).notificationPayload()["aps"]
        #expect(aps?["interruption-level"] == .string(wire))
        #expect(aps?["target-content-id"] == "window-2")
    }

    @Test("projecting the wrong kind is MS008, naming the operation and the kind")
    func wrongKind() throws {
        let widget = try SnapshotFixtures.snapshot("widget-dashboard")
        do {
            _ = try widget.liveActivityContentState()
            Issue.record("projected a widget as a Live Activity")
        } catch {
            #expect(error.issues.first?.path.description == "$.kind")
            #expect(error.issues.first?.message.contains("\"widget\"") == true)
            #expect(error.issues.first?.message.contains("liveActivity") == true)
        }
        #expect(throws: SnapshotValidationError.self) { try SnapshotFixtures.snapshot("queued").notificationPayload() }
        #expect(throws: Never.self) { try widget.requireKind([.widget, .standby], for: "a timeline entry") }
        #expect(SnapshotValidationError.trapID == "MS008")
    }

    @Test("content state and attributes of an in-progress activity, exact bytes")
    func contentStateInProgress() throws {
        let snapshot = try SnapshotFixtures.snapshot("active-progress")
        #expect(try snapshot.liveActivityContentState().encodedString()
            == #"{"headline":"Surface in progress","subhead":"The same snapshot feeds the app view and ActivityKit content state.","progress":0.5,"stage":"inProgress"}"#)
        #expect(try snapshot.liveActivityAttributes().encodedString() == #"{"surfaceId":"surface-active-progress","modeLabel":"active"}"#)
    }

    @Test("notification payload without a category: no category key, no nulls")
    func notificationThreadOnly() throws {
        let snapshot = try SnapshotFixtures.snapshot("notification-thread-grouped")
        #expect(try snapshot.notificationPayload().encodedString()
            == #"{"aps":{"alert":{"title":"Build queued","body":"Your build is waiting for a runner. We will notify you when it starts."},"sound":"default","thread-id":"build-9821"},"liveSurface":{"kind":"surface_notification","snapshotId":"fixture-notification-thread-grouped","surfaceId":"surface-notification-thread-grouped","state":"queued","deepLink":"mobilesurfaces://surface/surface-notification-thread-grouped"}}"#)
    }

    @Test("notification payload with every optional field, exact bytes: time-sensitive as Apple spells it")
    func notificationEveryField() throws {
        var object = try SnapshotFixtures.snapshot("notification-relevance-summary").encodeJSON().objectValue!
        var slice = object["notification"]!.objectValue!
        slice["subtitle"] = "Since 9 AM"
        slice["interruptionLevel"] = "timeSensitive"
        slice["targetContentId"] = "digest-window"
        object["notification"] = .object(slice)
        let snapshot = try LiveSurfaceSnapshot(json: .object(object))
        #expect(try snapshot.notificationPayload().encodedString()
            == #"{"aps":{"alert":{"title":"Daily digest ready","subtitle":"Since 9 AM","body":"Five surfaces updated since you last opened the app."},"sound":"default","category":"surface-update","thread-id":"digests","interruption-level":"time-sensitive","relevance-score":0.9,"target-content-id":"digest-window"},"liveSurface":{"kind":"surface_notification","snapshotId":"fixture-notification-relevance-summary","surfaceId":"surface-notification-relevance-summary","state":"active","deepLink":"mobilesurfaces://surface/surface-notification-relevance-summary"}}"#)
    }

    @Test("every projection refuses the kinds it does not serve")
    func gates() throws {
        let notification = try SnapshotFixtures.snapshot("notification-alert")
        let activity = try SnapshotFixtures.snapshot("queued")
        for name in try SnapshotFixtures.names("fixtures") {
            let snapshot = try LiveSurfaceSnapshot(parsing: SnapshotFixtures.bytes("fixtures", name))
            let isActivity = snapshot.kind == .liveActivity
            #expect(((try? snapshot.liveActivityContentState()) != nil) == isActivity, "\(name)")
            #expect(((try? snapshot.liveActivityAttributes()) != nil) == isActivity, "\(name)")
            #expect(((try? snapshot.alertPayload()) != nil) == isActivity, "\(name)")
            #expect(((try? snapshot.notificationPayload()) != nil) == (snapshot.kind == .notification), "\(name)")
        }
        #expect(throws: SnapshotValidationError.self) { try notification.alertPayload() }
        do {
            _ = try activity.notificationPayload()
            Issue.record("projected a Live Activity as a notification")
        } catch {
            #expect(error.issues.map(\.message) == [#"$.kind is "liveActivity" but a notification needs a notification snapshot"#])
            #expect(error.issues.map(\.rule) == ["kind"])
        }
    }
}
