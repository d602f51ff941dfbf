// ControlConfig::validate (src/control/control_config.cc): every setting's
// range, refused with EINVAL and a message that names it.
#include <catch2/catch.hpp>
#include <cerrno>
#include <limits>

#include "hiodsfs/control.h"

using namespace hiodsfs;

TEST_CASE("config: defaults are valid; bad values are rejected with the setting named") {
    ControlConfig ok;
    REQUIRE(ok.validate().is_ok());
    ok.target_ops = 1000;
    ok.target_bytes_per_s = 100e6;
    REQUIRE(ok.validate().is_ok());

    struct Case {
        const char* field;
        void (*apply)(ControlConfig&);
    };
    const Case cases[] = {
        {"target_ops", [](ControlConfig& c) { c.target_ops = -1; }},
        {"target_ops",
         [](ControlConfig& c) { c.target_ops = std::numeric_limits<double>::quiet_NaN(); }},
        {"target_bytes_per_s", [](ControlConfig& c) { c.target_bytes_per_s = -5; }},
        {"interval_ms", [](ControlConfig& c) { c.interval_ms = 0; }},
        {"interval_ms", [](ControlConfig& c) { c.interval_ms = 3'600'000; }},
        {"stress_gap_us", [](ControlConfig& c) { c.stress_gap_us = 0; }},
        {"stress_gap_us", [](ControlConfig& c) { c.stress_gap_us = 2'000'000; }},
        {"stress_ratio", [](ControlConfig& c) { c.stress_ratio = 0; }},
        {"stress_ratio", [](ControlConfig& c) { c.stress_ratio = 1.5; }},
        {"recency_ms", [](ControlConfig& c) { c.recency_ms = 0; }},
        {"switch_after", [](ControlConfig& c) { c.switch_after = 0; }},
        {"kp", [](ControlConfig& c) { c.kp = -0.1; }},
        {"ki", [](ControlConfig& c) { c.ki = std::numeric_limits<double>::infinity(); }},
        {"kd", [](ControlConfig& c) { c.kd = -1; }},
        {"kp and ki", [](ControlConfig& c) { c.kp = c.ki = 0; }},
        {"ramp_per_s", [](ControlConfig& c) { c.ramp_per_s = 0; }},
        {"capacity_margin", [](ControlConfig& c) { c.capacity_margin = 1; }},
        {"held_gap_us", [](ControlConfig& c) { c.held_gap_us = 0; }},
        {"held_gap_us", [](ControlConfig& c) { c.held_gap_us = 2'000'000; }},
        {"held_ratio", [](ControlConfig& c) { c.held_ratio = 0; }},
        {"held_ratio", [](ControlConfig& c) { c.held_ratio = 0.5; }},
    };
    for (const Case& c : cases) {
        ControlConfig cfg;
        c.apply(cfg);
        const Status st = cfg.validate();
        INFO(c.field << ": " << st.message());
        CHECK(st.err() == EINVAL);
        CHECK(st.message().find(c.field) != std::string::npos);
        CHECK(st.message().rfind("control: ", 0) == 0);
    }
    ControlConfig neg;
    neg.target_ops = -3;
    CHECK(neg.validate().message() ==
          "control: target_ops must be a finite number >= 0 (write ops/s; 0 = no goal), got -3");
}
