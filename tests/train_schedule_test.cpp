// Learning-rate schedules: the values of the documented formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "kael/core/error.hpp"
#include "kael/train/schedule.hpp"

using namespace kael;
using namespace kael::train;

TEST(TrainSchedule, ConstantWithWarmup) {
  Schedule schedule{ScheduleKind::constant, 1e-3, 4, 0.0, 100};
  EXPECT_DOUBLE_EQ(schedule.at(0), 1e-3 * 1 / 4);
  EXPECT_DOUBLE_EQ(schedule.at(3), 1e-3);
  EXPECT_DOUBLE_EQ(schedule.at(4), 1e-3);
  EXPECT_DOUBLE_EQ(schedule.at(99), 1e-3);
  schedule.warmup = 0;
  EXPECT_DOUBLE_EQ(schedule.at(0), 1e-3);
}

TEST(TrainSchedule, CosineFromPeakToFloor) {
  const Schedule schedule{ScheduleKind::cosine, 6e-4, 10, 6e-5, 110};
  for (std::int64_t s = 0; s < 10; ++s) EXPECT_DOUBLE_EQ(schedule.at(s), 6e-4 * static_cast<double>(s + 1) / 10);
  EXPECT_DOUBLE_EQ(schedule.at(10), 6e-4);
  EXPECT_NEAR(schedule.at(60), 6e-5 + 0.5 * (6e-4 - 6e-5), 1e-18);  // halfway
  for (std::int64_t s = 10; s < 110; ++s) {
    const double ratio = static_cast<double>(s - 10) / 100;
    EXPECT_DOUBLE_EQ(schedule.at(s), 6e-5 + 0.5 * (1 + std::cos(std::numbers::pi * ratio)) * (6e-4 - 6e-5));
  }
  EXPECT_DOUBLE_EQ(schedule.at(110), 6e-5);
  EXPECT_DOUBLE_EQ(schedule.at(500), 6e-5);  // past the end it stays at the floor
}

TEST(TrainSchedule, BadValuesAreRefused) {
  EXPECT_THROW((Schedule{ScheduleKind::cosine, -1.0, 0, 0.0, 10}.validate()), ValueError);
  EXPECT_THROW((Schedule{ScheduleKind::cosine, 1e-3, 0, 1e-2, 10}.validate()), ValueError);
  EXPECT_THROW((Schedule{ScheduleKind::cosine, 1e-3, -1, 0.0, 10}.validate()), ValueError);
  EXPECT_THROW((Schedule{ScheduleKind::cosine, NAN, 0, 0.0, 10}.validate()), ValueError);
  EXPECT_THROW(parse_schedule("linear"), ValueError);
  EXPECT_EQ(parse_schedule("cosine"), ScheduleKind::cosine);
}
