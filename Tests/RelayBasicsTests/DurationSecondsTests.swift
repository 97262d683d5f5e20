import RelayBasics
import Testing

@Suite("Duration in seconds")
struct DurationSecondsTests {
    @Test("whole and fractional seconds, both signs", arguments: [
        (Duration.zero, 0.0),
        (.seconds(3), 3.0),
        (.milliseconds(1500), 1.5),
        (.microseconds(250), 0.000_25),
        (.nanoseconds(1), 1e-9),
        (.milliseconds(-1500), -1.5),
        (.seconds(86_400 * 365), 31_536_000.0),
    ])
    func seconds(duration: Duration, expected: Double) {
        #expect(abs(duration.seconds - expected) <= abs(expected) * 1e-12 + 1e-15)
    }

    @Test("attoseconds count: a difference of instants keeps sub-nanosecond parts")
    func attoseconds() {
        let duration = Duration(secondsComponent: 2, attosecondsComponent: 500_000_000_000_000_000)
        #expect(duration.seconds == 2.5)
        #expect(Duration(secondsComponent: 0, attosecondsComponent: 1).seconds == 1e-18)
    }
}
