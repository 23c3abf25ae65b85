//! Constant-velocity Kalman filters for track state.
//!
//! Each tracked quantity (centroid x, centroid y, box width, box height) has its own
//! two-state filter `[position, velocity]` with a time step `dt` in frames of the stream's rate
//! (1 for each frame at a steady rate, more across a gap of dropped frames):
//! `F = [[1, dt], [0, 1]]`, `H = [1, 0]`, process noise of a piecewise-constant white
//! acceleration `Q = σa² · [[dt⁴/4, dt³/2], [dt³/2, dt²]]`, measurement noise `R = σm²`. The axes are
//! independent under this model (block-diagonal covariance), so the 8-state box filter is four
//! exact 2-state filters — no matrix library needed.

/// One axis: position and velocity with their 2x2 covariance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Kalman1 {
    /// `[position, velocity]`.
    pub x: [f64; 2],
    /// Covariance `[[p00, p01], [p01, p11]]`.
    pub p: [[f64; 2]; 2],
}

impl Kalman1 {
    /// Starts at `z` with zero velocity; `var_pos`/`var_vel` are the initial variances.
    #[must_use]
    pub fn new(z: f64, var_pos: f64, var_vel: f64) -> Self {
        Self {
            x: [z, 0.0],
            p: [[var_pos, 0.0], [0.0, var_vel]],
        }
    }

    /// One time step of `dt` frames: `x = F x`, `P = F P Fᵀ + Q` with acceleration variance
    /// `q`.
    pub(crate) fn predict(&mut self, q: f64, dt: f64) {
        let [p, v] = self.x;
        self.x = [p + v * dt, v];
        let [[a, b], [_, d]] = self.p;
        // F P Fᵀ for F = [[1,dt],[0,1]].
        let a2 = a + 2.0 * dt * b + dt * dt * d;
        let b2 = b + dt * d;
        let (dt2, dt3) = (dt * dt, dt * dt * dt);
        self.p = [
            [a2 + 0.25 * dt2 * dt2 * q, b2 + 0.5 * dt3 * q],
            [b2 + 0.5 * dt3 * q, d + dt2 * q],
        ];
    }

    /// Measurement update with position `z` of variance `r`.
    pub fn update(&mut self, z: f64, r: f64) {
        let [[a, b], [_, d]] = self.p;
        let s = a + r;
        let (k0, k1) = (a / s, b / s);
        let y = z - self.x[0];
        self.x = [self.x[0] + k0 * y, self.x[1] + k1 * y];
        // Joseph-free form (1 - K H) P, kept symmetric.
        let a2 = (1.0 - k0) * a;
        let b2 = (1.0 - k0) * b;
        let d2 = d - k1 * b;
        self.p = [[a2, b2], [b2, d2]];
    }

    /// Position.
    #[must_use]
    pub fn pos(&self) -> f64 {
        self.x[0]
    }

    /// Velocity (per frame).
    #[must_use]
    pub(crate) fn vel(&self) -> f64 {
        self.x[1]
    }
}

/// Centroid and box size, each with a constant-velocity filter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoxFilter {
    /// Centroid x, centroid y, width, height.
    pub axes: [Kalman1; 4],
}

impl BoxFilter {
    /// Starts at a measurement `[cx, cy, w, h]`.
    #[must_use]
    pub fn new(z: [f64; 4], var_pos: f64, var_vel: f64) -> Self {
        Self {
            axes: z.map(|v| Kalman1::new(v, var_pos, var_vel)),
        }
    }

    /// Predicts `dt` frames ahead (sizes are kept positive).
    pub(crate) fn predict(&mut self, q: f64, dt: f64) {
        for a in &mut self.axes {
            a.predict(q, dt);
        }
        for a in &mut self.axes[2..] {
            a.x[0] = a.x[0].max(1.0);
        }
    }

    /// Folds in a measurement `[cx, cy, w, h]`.
    pub fn update(&mut self, z: [f64; 4], r: f64) {
        for (a, v) in self.axes.iter_mut().zip(z) {
            a.update(v, r);
        }
    }

    /// Folds in a centroid measurement `[cx, cy]` only; the size is left as it is.
    pub(crate) fn update_centroid(&mut self, z: [f64; 2], r: f64) {
        self.axes[0].update(z[0], r);
        self.axes[1].update(z[1], r);
    }

    /// Sets the box size to `[w, h]` and its rate of change to 0: a hidden object keeps the
    /// size it had when last seen whole.
    pub(crate) fn hold_size(&mut self, size: [f64; 2]) {
        for (a, s) in self.axes[2..].iter_mut().zip(size) {
            a.x = [s.max(1.0), 0.0];
            a.p[0][1] = 0.0;
            a.p[1][0] = 0.0;
        }
    }

    /// `[cx, cy]`.
    #[must_use]
    pub fn centroid(&self) -> [f64; 2] {
        [self.axes[0].pos(), self.axes[1].pos()]
    }

    /// `[vx, vy]` in pixels per frame.
    #[must_use]
    pub fn velocity(&self) -> [f64; 2] {
        [self.axes[0].vel(), self.axes[1].vel()]
    }

    /// `[left, top, width, height]` around the centroid.
    #[must_use]
    pub fn bbox(&self) -> [f64; 4] {
        let (w, h) = (self.axes[2].pos().max(1.0), self.axes[3].pos().max(1.0));
        [
            self.axes[0].pos() - 0.5 * (w - 1.0),
            self.axes[1].pos() - 0.5 * (h - 1.0),
            w,
            h,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_to_constant_velocity() {
        let mut k = Kalman1::new(0.0, 1.0, 100.0);
        for t in 1..40 {
            k.predict(0.01, 1.0);
            k.update(3.0 * f64::from(t) + 5.0, 1.0);
        }
        assert!((k.vel() - 3.0).abs() < 0.05, "velocity {}", k.vel());
        k.predict(0.01, 1.0);
        assert!((k.pos() - (3.0 * 40.0 + 5.0)).abs() < 0.5);
        // Covariance stays symmetric positive.
        assert!(
            k.p[0][0] > 0.0 && k.p[1][1] > 0.0 && k.p[0][0] * k.p[1][1] >= k.p[0][1] * k.p[0][1]
        );
    }

    #[test]
    fn a_long_step_equals_as_many_unit_steps_without_noise() {
        let mut one = Kalman1::new(4.0, 2.0, 9.0);
        one.x[1] = 1.5;
        let mut many = one;
        one.predict(0.0, 3.0);
        for _ in 0..3 {
            many.predict(0.0, 1.0);
        }
        assert_eq!(one.x, many.x);
        for r in 0..2 {
            for c in 0..2 {
                assert!(
                    (one.p[r][c] - many.p[r][c]).abs() < 1e-12,
                    "{:?} {:?}",
                    one.p,
                    many.p
                );
            }
        }
        // Process noise grows with the step: a longer gap leaves the position less certain.
        let mut short = Kalman1::new(0.0, 1.0, 1.0);
        let mut long = short;
        short.predict(1.0, 1.0);
        long.predict(1.0, 2.0);
        assert!(long.p[0][0] > short.p[0][0] + 4.0);
    }

    #[test]
    fn box_filter_round_trip() {
        let mut b = BoxFilter::new([10.0, 20.0, 5.0, 7.0], 1.0, 25.0);
        assert_eq!(b.bbox(), [8.0, 17.0, 5.0, 7.0]);
        for t in 1..20 {
            b.predict(0.1, 1.0);
            b.update([10.0 + 2.0 * f64::from(t), 20.0, 5.0, 7.0], 1.0);
        }
        assert!((b.velocity()[0] - 2.0).abs() < 0.1);
        assert!(b.velocity()[1].abs() < 1e-9);
        // A shrinking box, then held: the size stays whatever the predictions.
        for t in 1..10 {
            b.predict(0.1, 1.0);
            b.update([48.0, 20.0, 5.0 - 0.4 * f64::from(t), 7.0], 1.0);
        }
        assert!(b.axes[2].vel() < -0.2);
        b.hold_size([5.0, 7.0]);
        for _ in 0..20 {
            b.predict(0.1, 1.0);
        }
        assert_eq!([b.bbox()[2], b.bbox()[3]], [5.0, 7.0]);
        // Centroid-only updates leave the size alone.
        b.update_centroid([0.0, 0.0], 1.0);
        assert_eq!([b.bbox()[2], b.bbox()[3]], [5.0, 7.0]);
        assert!(b.centroid()[0] < 60.0);
    }
}
